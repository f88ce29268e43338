assert issubclass(Rectangle, Shape) and not issubclass(Shape, Rectangle)
assert isinstance(make_shape("square", 1), (Circle, Rectangle)) and isinstance(make_shape("square", 1), Shape)
assert type(make_shape("circle", 2)) is Circle and round(make_shape("circle", 2).area(), 2) == 12.57
assert make_shape("square", 4).area() == 16 and type(Square(2)) is Square

class Shape:
    registry = []

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        Shape.registry.append(cls.__name__)

    def area(self):
        raise NotImplementedError

    def __repr__(self):
        return f"{type(self).__name__}(area={self.area():.2f})"


class Square(Shape):
    __slots__ = ("side",)

    def __init__(self, side):
        self.side = side

    def area(self):
        return self.side ** 2


class Circle(Shape):
    def __init__(self, r):
        self._r = r

    @property
    def r(self):
        return self._r

    def area(self):
        return 3.14159 * self.r ** 2


print(Shape.registry, [Square(2), Circle(1)])
print(Square, Square.__module__, Square.__qualname__, Square.mro()[1])
print(sorted(s.area() for s in (Square(3), Circle(2))))

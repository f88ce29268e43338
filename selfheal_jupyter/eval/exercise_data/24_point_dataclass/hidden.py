from dataclasses import asdict, is_dataclass
assert is_dataclass(Point) and asdict(Point(1.0, 2.0)) == {"x": 1.0, "y": 2.0}
assert midpoint(Point(0.0, 0.0), Point(2.0, 2.0)) == Point(1.0, 1.0)
assert type(parse_point("5,6")) is Point and parse_point("5,6").x == 5.0
assert abs(distance(Point(1.0, 1.0), Point(4.0, 5.0)) - 5.0) < 1e-9

# Exercise 24 - A point as a dataclass
# ------------------------------------
# `Point` holds two float coordinates, x and y: make it a dataclass. `distance(p, q)`
# is the distance between two points; `midpoint(p, q)` is a new Point halfway between
# them; `parse_point("1,2")` builds a Point from text.
#
# The checks look at the class itself: do not change them.

import math
from dataclasses import dataclass, fields


@dataclass
class Point:
    x: float
    y: float


def distance(p, q):
    return math.sqrt((p.x - q.x) ** 2 + (p.y - q.y) ** 2)


def midpoint(p, q):
    return Point((p.x + q.x) / 2, (p.y + q.y) / 2)


def parse_point(text):
    x, y = text.split(",")
    return Point(float(x), float(y))


a = parse_point("0,0")
b = parse_point("3,4")
print(distance(a, b), midpoint(a, b))

# checks (do not change)
assert [f.name for f in fields(Point)] == ["x", "y"]
assert [f.type for f in fields(Point)] == [float, float]
assert distance(a, b) == 5.0
assert type(midpoint(a, b)) is Point
assert midpoint(a, b) == Point(1.5, 2.0)
assert isinstance(parse_point("1,2"), Point)

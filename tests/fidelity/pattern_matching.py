from dataclasses import dataclass


@dataclass
class Point:
    x: int
    y: int


def describe(obj):
    match obj:
        case Point(x=0, y=0):
            return "origin"
        case Point(x=0, y=y):
            return f"on the y axis at {y}"
        case [first, *rest]:
            return f"list starting with {first}, {len(rest)} more"
        case {"name": str(name)}:
            return f"named {name}"
        case _:
            return "something else"


for o in (Point(0, 0), Point(0, 5), [1, 2, 3], {"name": "x"}, 42):
    print(describe(o))

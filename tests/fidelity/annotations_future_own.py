# The program's own `from __future__ import annotations`: strings, resolved on demand.
from __future__ import annotations

import dataclasses
import typing
from typing import ClassVar


def f(a: int, b: Point) -> list[int]:
    return [a]


@dataclasses.dataclass
class Point:
    x: int
    y: int = 0
    count: ClassVar[int] = 0


print(f.__annotations__)
print(typing.get_type_hints(f))
print([fl.name for fl in dataclasses.fields(Point)])
print(Point(1, 2), Point.count)

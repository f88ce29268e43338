from typing import Generic, NamedTuple, Protocol, TypedDict, TypeVar, runtime_checkable

T = TypeVar("T")


class Box(Generic[T]):
    def __init__(self, item: T):
        self.item = item


class Movie(TypedDict):
    title: str
    year: int


@runtime_checkable
class Closable(Protocol):
    def close(self) -> None: ...


class Point(NamedTuple):
    x: int
    y: int = 0


print(Box[int], Box(3).item, Movie(title="x", year=1), Movie.__annotations__)
print(isinstance(open(__file__), Closable), Point(1), Point._fields, Point.__annotations__)

import dataclasses
from dataclasses import dataclass, field


@dataclass(order=True, frozen=True)
class Version:
    major: int
    minor: int = 0
    tags: tuple = field(default=(), compare=False)


@dataclass
class Inventory:
    items: list[str] = field(default_factory=list)


v = Version(1, 2, ("beta",))
print(v, v < Version(1, 3), sorted([Version(2), Version(1, 5)]))
try:
    v.major = 3
except dataclasses.FrozenInstanceError as e:
    print(type(e).__name__, e)
inv = Inventory()
inv.items.append("apple")
print(inv, Inventory(), dataclasses.asdict(inv))
print(Inventory.__dataclass_fields__["items"].type)

# typing.get_type_hints resolves forward references in the module of the class.
import typing
from typing import Optional


class Node:
    value: int
    next: Optional["Node"]

    def link(self, other: "Node") -> "Node":
        return other


print(typing.get_type_hints(Node))
print(typing.get_type_hints(Node.link))
print(Node.__annotations__)

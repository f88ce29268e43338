import copy


class Tree:
    def __init__(self, label, children=()):
        self.label = label
        self.children = list(children)

    def __repr__(self):
        return f"Tree({self.label!r}, {self.children!r})"


t = Tree("root", [Tree("a"), Tree("b")])
c = copy.deepcopy(t)
c.children[0].label = "changed"
print(t)
print(c)
print(copy.copy(t).children is t.children)

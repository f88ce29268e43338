# Functions, enum members and named tuples of __main__ pickle by reference.
import enum
import pickle
import typing


def square(x):
    return x * x


class Color(enum.Enum):
    RED = 1
    GREEN = 2


class Pair(typing.NamedTuple):
    left: int
    right: int


print(pickle.loads(pickle.dumps(square))(7))
print(pickle.loads(pickle.dumps(Color.GREEN)) is Color.GREEN)
print(pickle.loads(pickle.dumps(Pair(1, 2))))
print(square.__module__, Color.__module__, Pair.__module__)

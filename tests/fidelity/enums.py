import enum


class Color(enum.Enum):
    RED = 1
    GREEN = 2
    BLUE = 3


class Perm(enum.Flag):
    R = 4
    W = 2
    X = 1


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


print(list(Color), Color(2), Color["BLUE"], repr(Color.RED))
print(Perm.R | Perm.W, Perm.R in (Perm.R | Perm.X), list(Perm))
print(Level.HIGH > Level.LOW, Level.HIGH + 1, f"{Level.LOW}")
print(Color.__module__, type(Color.RED))

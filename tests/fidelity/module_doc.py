"""A module docstring: the first statement of the program."""

print(repr(__doc__))
print(__doc__.split()[1])

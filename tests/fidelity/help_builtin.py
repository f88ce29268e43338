# help() on a program-defined function, written to a pipe (no pager).
def area(width: float, height: float = 1.0) -> float:
    """The area of a rectangle."""
    return width * height


help(area)

# doctest.testmod() finds the doctests of the __main__ module.
def add(a, b):
    """
    >>> add(2, 3)
    5
    >>> add("a", "b")
    'ab'
    >>> add(1, 1)
    3
    """
    return a + b


if __name__ == "__main__":
    import doctest

    print(doctest.testmod())

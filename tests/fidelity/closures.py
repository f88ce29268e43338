def counter():
    count = 0

    def inc(step=1):
        nonlocal count
        count += step
        return count

    return inc


c = counter()
c()
c(5)
print(c(), c.__closure__[0].cell_contents, c.__code__.co_freevars)
late = [lambda: i for i in range(3)]
bound = [lambda i=i: i for i in range(3)]
print([f() for f in late], [f() for f in bound])
print(counter.__qualname__, c.__qualname__)

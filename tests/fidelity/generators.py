def countdown(n):
    while n > 0:
        received = yield n
        if received:
            n = received
        n -= 1
    return "liftoff"


def chain(*its):
    result = yield from countdown(3)
    yield result
    for it in its:
        yield from it


g = countdown(5)
print(next(g), g.send(10), next(g))
print(list(chain("ab", range(2))))
squares = (x * x for x in range(5))
print(sum(squares), list(squares))
g2 = countdown(2)
next(g2)
g2.close()
print(g2.gi_frame)

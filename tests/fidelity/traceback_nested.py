def parse(items):
    return [ratio(a, b) for a, b in items]


def ratio(a, b):
    return scale(a) / scale(b)


def scale(x):
    return x * 2


print(parse([(1, 2), (3, 4)]))
print(parse([(1, 2), (3, 0)]))

def mean(xs):
    return sum(xs) / len(xs)


assert mean([1, 2, 3]) == 2
assert mean([1, 2]) == 2, f"expected 2, got {mean([1, 2])}"

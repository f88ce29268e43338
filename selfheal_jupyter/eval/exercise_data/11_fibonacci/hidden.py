assert fibonacci(2) == [0, 1]
assert fibonacci(3) == [0, 1, 1]
assert fibonacci(12)[-1] == 89
assert len(fibonacci(25)) == 25

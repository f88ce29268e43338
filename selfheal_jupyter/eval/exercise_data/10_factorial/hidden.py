assert factorial(1) == 1
assert factorial(3) == 6
assert factorial(10) == 3628800
try:
    factorial(-5)
except ValueError:
    pass
else:
    raise AssertionError("no ValueError")

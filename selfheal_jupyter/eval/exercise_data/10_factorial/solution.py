# Exercise 10 - Factorial
# -----------------------
# `factorial(n)` returns n! = 1 * 2 * ... * n, computed with a loop (0! is 1).
# For a negative n it must raise ValueError.
#
# The checks below must stay as they are.


def factorial(n):
    if n < 0:
        raise ValueError("n must be >= 0")
    result = 1
    for i in range(1, n + 1):
        result = result * i
    return result


for n in range(6):
    print(n, factorial(n))

# checks (do not change)
assert factorial(0) == 1
assert factorial(5) == 120
try:
    factorial(-1)
    raised = False
except ValueError:
    raised = True
assert raised, "factorial(-1) must raise ValueError"

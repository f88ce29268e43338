# Exercise 11 - Fibonacci
# -----------------------
# `fibonacci(n)` returns the list of the first n Fibonacci numbers:
# 0, 1, 1, 2, 3, 5, 8, ...  (fibonacci(0) is an empty list).
#
# Do not change the asserts.


def fibonacci(n):
    numbers = [0, 1]
    while len(numbers) < n:
        # TODO: the next number is the sum of the two previous ones
        numbers.append(numbers[-1] + 1)
    return numbers


print(fibonacci(10))

# --- checks (do not change) ---
assert fibonacci(7) == [0, 1, 1, 2, 3, 5, 8]
assert fibonacci(1) == [0]
assert fibonacci(0) == []

# Exercise 6 - The largest number
# -------------------------------
# Without using the built-in max(), write `largest(numbers)` which returns the
# largest number of a non-empty list. It must work for negative numbers too.
#
# Keep the checks below unchanged.

temperatures = [-3, -7, -1, -12]
scores = [4, 19, 7, 19, 2]


def largest(numbers):
    best = numbers[0]
    for n in numbers:
        if n > best:
            best = n
    return best


print("warmest:", largest(temperatures))
print("best score:", largest(scores))

# checks (do not change)
assert largest(scores) == 19
assert largest(temperatures) == -1
assert largest([5]) == 5

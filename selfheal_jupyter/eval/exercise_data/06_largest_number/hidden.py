assert largest([-5, -2, -9]) == -2
assert largest([1, 2, 3]) == 3
assert largest([3, 2, 1]) == 3
assert largest([0.5, 0.25]) == 0.5
assert largest([-100]) == -100

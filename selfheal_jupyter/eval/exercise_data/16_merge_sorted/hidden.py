assert merge([], []) == []
assert merge([1, 1], [1]) == [1, 1, 1]
assert merge([1, 3, 5, 7], [2]) == [1, 2, 3, 5, 7]
assert merge([-3, 0], [-5, 10]) == [-5, -3, 0, 10]

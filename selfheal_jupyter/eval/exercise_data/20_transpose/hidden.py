assert transpose([]) == []
assert transpose([[1, 2]]) == [[1], [2]]
assert transpose([[1], [2], [3]]) == [[1, 2, 3]]
assert transpose(transpose([[1, 2], [3, 4], [5, 6]])) == [[1, 2], [3, 4], [5, 6]]
assert shape([[1, 2]]) == (1, 2)

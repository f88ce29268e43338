# Exercise 20 - Transposing a matrix
# ----------------------------------
# A matrix is a list of rows (lists of the same length). `transpose(m)` returns
# a new matrix whose rows are the columns of m. `shape(m)` returns
# (number of rows, number of columns); an empty matrix has shape (0, 0).
#
# The asserts below are the teacher's: do not change them.

m = [[1, 2, 3],
     [4, 5, 6]]


def shape(m):
    if not m:
        return (0, 0)
    return (len(m), len(m[0]))


def transpose(m):
    rows, cols = shape(m)
    result = []
    for c in range(cols):
        # TODO: build column c
        result.append([m[r][c] for r in range(rows)])
    return result


print(transpose(m))

# checks (do not change)
assert shape(m) == (2, 3)
assert transpose(m) == [[1, 4], [2, 5], [3, 6]]
assert transpose([[7]]) == [[7]]
assert shape([]) == (0, 0)

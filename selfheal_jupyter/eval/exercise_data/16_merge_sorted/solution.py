# Exercise 16 - Merging sorted lists
# ----------------------------------
# `merge(a, b)` takes two lists that are already sorted and returns one sorted
# list with all their elements. Do not use sort() or sorted(): walk both lists.
#
# The checks at the bottom must not be changed.


def merge(a, b):
    i, j = 0, 0
    merged = []
    while i < len(a) and j < len(b):
        if a[i] <= b[j]:
            merged.append(a[i])
            i += 1
        else:
            merged.append(b[j])
            j += 1
    merged.extend(a[i:])
    merged.extend(b[j:])
    return merged


print(merge([1, 4, 9], [2, 3, 10, 12]))

# checks (do not change)
assert merge([1, 4, 9], [2, 3, 10, 12]) == [1, 2, 3, 4, 9, 10, 12]
assert merge([], [1, 2]) == [1, 2]
assert merge([5], []) == [5]

# Exercise 17 - Removing duplicates
# ---------------------------------
# `unique(items)` returns a new list without duplicates, keeping the first time
# each element appears (so the order is kept). set() alone loses the order.
#
# Do not modify the asserts.

visitors = ["ana", "ben", "ana", "carl", "ben", "dina"]


def unique(items):
    # TODO: keep the order of first appearance
    return list(set(items))


print(unique(visitors))

# checks (do not change)
assert unique(visitors) == ["ana", "ben", "carl", "dina"]
assert unique([3, 1, 3, 2, 1]) == [3, 1, 2]
assert unique([]) == []

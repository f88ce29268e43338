assert cart_total([("a", 2.0, 3)]) == 6.0
assert cart_total([("a", 100.0, 1)]) == 100.0
assert cart_total([("a", 50.0, 3)]) == 135.0
assert cart_total([("a", 0.1, 3), ("b", 0.2, 1)]) == 0.5

assert summary({}) == {}
assert summary({"X": [5]}) == {"X": (5, 5, 5.0)}
assert summary({"Y": [1, 2]}) == {"Y": (1, 2, 1.5)}
assert warmest_city({"A": [1, 1], "B": [0, 5], "C": [2, 2]}) == "B"

assert tally([]) == {}
assert winner(["z"]) == "z"
assert winner(["a", "b", "b", "a", "b"]) == "b"
assert winner(["a", "a", "b", "b", "c"]) is None

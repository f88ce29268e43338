assert letter(0) == "F"
assert letter(89) == "B"
assert letter(69) == "D"
assert letter(70) == "C"
assert report([]) == []
assert report([91, 81, 71, 61, 51]) == ["A", "B", "C", "D", "F"]

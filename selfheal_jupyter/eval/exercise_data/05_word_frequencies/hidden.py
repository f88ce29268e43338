assert word_counts("") == {}
assert word_counts("Hi! hi? HI.") == {"hi": 3}
assert most_common("x y y z y x") == "y"
assert word_counts("end, end") == {"end": 2}

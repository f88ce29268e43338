# Exercise 25 - Numbers from text
# -------------------------------
# `to_number(text)` turns text into a number: "42" gives the int 42, "4.5" the float
# 4.5, and any other text gives None. `average(texts)` is the average (a float) of
# the texts that are numbers, or None when none of them is.
#
# The asserts check the types too: do not change them.

values = ["3", "4.5", "abc", "10", ""]


def to_number(text):
    # TODO: an int for a whole number, a float otherwise, None for the rest
    return float(text)


def average(texts):
    numbers = [to_number(t) for t in texts]
    # TODO: leave out what is not a number; None when nothing is left
    return sum(numbers) / len(numbers)


print(average(values))

# checks (do not change)
assert to_number("42") == 42 and type(to_number("42")) is int
assert type(to_number("4.5")) is float
assert to_number("abc") is None
assert type(average(["1", "2"])) is float
assert average(values) == 17.5 / 3
assert average(["x"]) is None

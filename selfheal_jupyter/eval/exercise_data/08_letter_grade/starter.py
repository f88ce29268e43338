# Exercise 8 - Letter grades
# --------------------------
# `letter(score)` turns a score (0-100) into a letter:
#   90 and above -> "A", 80-89 -> "B", 70-79 -> "C", 60-69 -> "D", below 60 -> "F".
# `report(scores)` returns the list of letters.
#
# Don't change the checks at the end.


def letter(score):
    if score > 90:
        return "A"
    elif score > 80:
        return "B"
    elif score > 70:
        return "C"
    elif score > 60:
        return "D"
    # TODO: the remaining case


def report(scores):
    return [letter(s) for s in scores]


print(report([95, 90, 85, 59, 60]))

# checks (do not change)
assert letter(90) == "A"
assert letter(80) == "B"
assert letter(59) == "F"
assert report([100, 75, 60]) == ["A", "C", "D"]

# Exercise 13 - Body-mass index
# -----------------------------
# bmi = weight (kg) / height (m) squared, rounded to 1 decimal.
# `category(bmi)`: below 18.5 "underweight", below 25 "normal", below 30
# "overweight", otherwise "obese".
#
# Do not change the checks.

people = {"Ana": (54, 1.68), "Ben": (92, 1.80), "Chloe": (70, 1.75)}


def bmi(weight, height):
    # TODO: the height must be squared
    return round(weight / height * 2, 1)


def category(value):
    if value < 18.5:
        return "underweight"
    if value < 25:
        return "normal"
    # TODO: overweight and obese
    return "normal"


for name, (w, h) in people.items():
    print(name, bmi(w, h), category(bmi(w, h)))

# checks (do not change)
assert bmi(70, 1.75) == 22.9
assert category(bmi(92, 1.80)) == "overweight"
assert category(31.0) == "obese"

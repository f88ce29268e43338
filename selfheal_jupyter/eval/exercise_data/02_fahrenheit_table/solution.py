# Exercise 2 - Temperature table
# ------------------------------
# Write `to_fahrenheit(c)` (F = C * 9/5 + 32) and `table(celsius_list)` which
# returns a list of (celsius, fahrenheit) pairs, the Fahrenheit value rounded to
# one decimal.
#
# Do not change the checks at the end of the cell.


def to_fahrenheit(c):
    # TODO: fix the formula
    return c * 9 / 5 + 32


def table(celsius_list):
    rows = []
    for c in celsius_list:
        # TODO: round the Fahrenheit value to one decimal
        rows.append((c, round(to_fahrenheit(c), 1)))
    return rows


for c, f in table([-40, 0, 37, 100]):
    print(f"{c:>5} C = {f:>6} F")

# checks (do not change)
assert to_fahrenheit(100) == 212
assert to_fahrenheit(-40) == -40
assert table([37]) == [(37, 98.6)]

# Exercise 14 - Running totals
# ----------------------------
# `running_totals(values)` returns the list of cumulative sums:
# [3, 1, 4] -> [3, 4, 8]. The input list must not be modified.
#
# The asserts at the end are fixed.

daily_sales = [120, 80, 95, 130, 60]


def running_totals(values):
    totals = list(values)
    for i in range(1, len(values)):
        # TODO: add the previous total
        totals[i] = values[i] + totals[i - 1]
    return totals


print(running_totals(daily_sales))

# checks (do not change)
assert running_totals([3, 1, 4]) == [3, 4, 8]
before = list(daily_sales)
assert running_totals(daily_sales)[-1] == 485
assert daily_sales == before, "the input list must not change"

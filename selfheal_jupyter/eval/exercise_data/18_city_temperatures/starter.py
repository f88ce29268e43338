# Exercise 18 - Weather summary
# -----------------------------
# `summary(readings)` takes a dict {city: [temperatures]} and returns a dict
# {city: (minimum, maximum, mean)}, the mean rounded to 1 decimal.
# `warmest_city(readings)` returns the city with the highest mean.
#
# Leave the teacher's checks unchanged.

readings = {
    "Oslo": [-2, 1, 3, 0],
    "Rome": [14, 17, 19, 15],
    "Cairo": [22, 25, 27, 24],
}


def summary(readings):
    result = {}
    for city, temps in readings:
        # TODO: minimum, maximum and mean of temps
        result[city] = (min(temps), max(temps), sum(temps))
    return result


def warmest_city(readings):
    means = {city: values[2] for city, values in summary(readings).items()}
    # TODO: the city with the highest mean
    return min(means, key=means.get)


print(summary(readings))
print("warmest:", warmest_city(readings))

# checks (do not change)
assert summary(readings)["Oslo"] == (-2, 3, 0.5)
assert summary(readings)["Rome"] == (14, 19, 16.2)
assert warmest_city(readings) == "Cairo"

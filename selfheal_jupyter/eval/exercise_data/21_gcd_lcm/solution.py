# Exercise 21 - GCD and LCM
# -------------------------
# `gcd(a, b)`: Euclid's algorithm - while b is not 0, replace (a, b) by
# (b, a % b); the answer is a. `lcm(a, b)` = a * b // gcd(a, b).
# Both take positive integers.
#
# Do not edit the checks.


def gcd(a, b):
    while b != 0:
        # TODO: both values must change at the same time
        a, b = b, a % b
    return a


def lcm(a, b):
    return a * b // gcd(a, b)


print(gcd(48, 18), lcm(4, 6))

# checks (do not change)
assert gcd(48, 18) == 6
assert gcd(7, 5) == 1
assert lcm(4, 6) == 12

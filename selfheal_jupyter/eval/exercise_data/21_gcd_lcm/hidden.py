assert gcd(10, 10) == 10
assert gcd(100, 75) == 25
assert gcd(17, 34) == 17
assert lcm(21, 6) == 42
assert lcm(5, 7) == 35

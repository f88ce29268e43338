assert to_fahrenheit(0) == 32
assert to_fahrenheit(10) == 50
assert table([]) == []
assert table([0, 100]) == [(0, 32.0), (100, 212.0)]
assert table([21.5]) == [(21.5, 70.7)]

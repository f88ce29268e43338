assert average([1, 2, 3, 4]) == 2.5
assert average([7]) == 7.0
assert average([]) == 0.0
assert abs(average([0.1, 0.2, 0.3]) - 0.2) < 1e-9
assert average([-4, 4]) == 0.0

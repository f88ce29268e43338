assert bmi(54, 1.68) == 19.1
assert category(18.4) == "underweight"
assert category(18.5) == "normal"
assert category(29.9) == "overweight"
assert category(30) == "obese"

assert type(to_number("-7")) is int and to_number("-7") == -7
assert type(to_number("0.25")) is float and to_number("0.25") == 0.25
assert to_number("") is None and to_number("1,5") is None
assert average(["2", "3"]) == 2.5 and type(average(["2", "4"])) is float
assert average([]) is None

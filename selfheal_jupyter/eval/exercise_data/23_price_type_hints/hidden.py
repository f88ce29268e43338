import inspect
assert inspect.signature(parse_price).parameters["text"].annotation == str
assert type(format_price(2, "EUR")) is str and format_price(2, "EUR") == "2.00 EUR"
assert format_price(1234.5, "JPY") == "1234.50 JPY"
assert parse_price("0.99 GBP") == 0.99 and type(parse_price("10.00 EUR")) is float

# Exercise 23 - A function with type hints
# ----------------------------------------
# `format_price(amount, currency)` returns a price as text, e.g. "3.50 EUR": the
# amount with 2 decimals, a space, then the currency code. `parse_price(text)` does
# the opposite: "3.50 EUR" gives the float 3.5.
# Both carry type hints: the amount is a float, the currency and the text are str,
# format_price returns a str and parse_price a float.
#
# The checks at the end read the hints with `inspect`: do not change them.

import inspect


def format_price(amount: float, currency: str) -> str:
    return f"{amount:.2f} {currency}"


def parse_price(text: str) -> float:
    number, currency = text.split()
    return float(number)


print(format_price(3.5, "EUR"))
print(parse_price("3.50 EUR"))

# checks (do not change)
sig = inspect.signature(format_price)
params = sig.parameters
assert params["amount"].annotation == float
assert params["currency"].annotation == str
assert sig.return_annotation == str
assert format_price(3.5, "EUR") == "3.50 EUR"
assert inspect.signature(parse_price).return_annotation == float
assert type(parse_price("3.50 EUR")) is float
assert parse_price(format_price(12.25, "USD")) == 12.25

import collections
import datetime
import decimal
import fractions
import json
import math
import random
import re

random.seed(1234)
print(random.randint(1, 100), random.choice("abcdef"), round(random.random(), 6))
print(math.comb(10, 3), math.isqrt(99), math.pi)
print(fractions.Fraction(3, 4) + fractions.Fraction(1, 6), decimal.Decimal("1.1") + decimal.Decimal("2.2"))
print(datetime.date(2024, 2, 29) + datetime.timedelta(days=1), datetime.datetime(2020, 1, 1).isoformat())
print(collections.Counter("mississippi").most_common(2), re.findall(r"\d+", "a1b22c333"))
print(json.dumps({"b": [1, 2.5, None], "a": "é"}, sort_keys=True), json.dumps("é", ensure_ascii=False))
print(sorted({"pear", "apple", "fig"}), 0.1 + 0.2, 1e16, 2 ** 100)

# How many different people signed up (names differ only in case and spaces)
unique = sorted({normalise(n).lower() for n in signups})
print(f"{len(unique)} unique names: {', '.join(unique)}")
assert len(unique) == 3

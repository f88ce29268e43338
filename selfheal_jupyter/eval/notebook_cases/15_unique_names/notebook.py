# %%
signups = ["Ana", " ben", "ANA ", "Cas", "ben", "cas  "]

# %%
def normalise(name):
    """A name as we store it: no surrounding spaces."""
    return name.strip()

# %%
# How many different people signed up (names differ only in case and spaces)
unique = sorted({normalise(n) for n in signups})
print(f"{len(unique)} unique names: {', '.join(unique)}")
assert len(unique) == 3

# %%
readings = [
    {"city": "Oslo", "temp": 5.0},
    {"city": "Rome", "temp": 18.5},
    {"city": "Cairo", "temp": 31.0},
]

# %%
def c_to_f(c):
    return c * 9 / 5 + 32

# %%
# One line per city, in Fahrenheit
for r in readings:
    print(r["city"] + ": " + c_to_f(r["temp"]) + " F")

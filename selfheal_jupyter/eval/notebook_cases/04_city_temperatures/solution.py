# One line per city, in Fahrenheit
for r in readings:
    print(r["city"] + ": " + str(c_to_f(r["temp"])) + " F")

print("no newline at the end", end="")
print(" - still the same line", end="")

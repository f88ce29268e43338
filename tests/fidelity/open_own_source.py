# A program reading its own file.
with open(__file__, encoding="utf-8") as f:
    lines = f.read().splitlines()
print(len(lines), lines[0])

# Total spent in April
rows = [line.split(",") for line in raw.splitlines()[1:]]
total = sum(float(r[2]) for r in rows)
print(f"total: {total:.2f}")
print("purchases:", len(rows))

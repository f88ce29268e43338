# Summary of today's readings
print("n =", stats.n)
print(f"mean = {stats.mean():.2f}")
print(f"spread = {stats.high - stats.low:.1f}")

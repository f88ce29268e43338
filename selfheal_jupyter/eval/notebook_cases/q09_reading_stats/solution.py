print(f"mean {readings.mean():.2f}")
print(f"std {readings.std():.2f}")

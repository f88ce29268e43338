# Average score of the people who answered
avg = survey["score"].mean()
print(f"average: {avg:.2f}")
assert not math.isnan(avg)

# %%
scores = [71, 58, 90, 66, 84, 77, 62]

# %%
def describe(values):
    return f"{len(values)} values from {min(values)} to {max(values)}"

# %%
# The median of the exam scores (an odd number of them)
median = sorted(scores)[len(scores) / 2]
print(describe(scores))
print("median:", median)

# The median of the exam scores (an odd number of them)
median = sorted(scores)[len(scores) // 2]
print(describe(scores))
print("median:", median)

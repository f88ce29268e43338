# %%
import numpy as np

# %%
# Marks of one student and the weight of each assignment
marks = np.array([7.0, 8.5, 6.0, 9.0])
weights = np.array([0.2, 0.3, 0.1, 0.4])

# %%
# The weighted final mark
final = np.dot(marks, weights) / weights.sum
print(f"final mark: {final:.2f}")

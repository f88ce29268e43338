# The weighted final mark
final = np.dot(marks, weights) / weights.sum()
print(f"final mark: {final:.2f}")

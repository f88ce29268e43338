best = max(scores, key=scores.get)
print(best, scores[best])

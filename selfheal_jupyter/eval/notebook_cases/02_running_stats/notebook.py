# %%
import math

# %%
class RunningStats:
    """Mean and spread of a stream of readings, without keeping them all."""

    def __init__(self):
        self.n = 0
        self.total = 0.0
        self.low = math.inf
        self.high = -math.inf

    def add(self, x):
        self.n += 1
        self.total += x
        self.low = min(self.low, x)
        self.high = max(self.high, x)

    def mean(self):
        return self.total / self.n

# %%
readings = [4.0, 7.5, 3.0, 6.5, 2.0, 4.0]
stats = RunningStats()
for r in readings:
    stats.add(r)

# %%
# Summary of today's readings
print("n =", stats.count)
print(f"mean = {stats.mean():.2f}")
print(f"spread = {stats.high - stats.low:.1f}")

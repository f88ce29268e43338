# requires: matplotlib
import os

import matplotlib.pyplot as plt

fig, ax = plt.subplots(figsize=(3, 2))
ax.plot([1, 2, 3], [1, 4, 9], label="squares")
ax.legend()
fig.savefig("squares.png", dpi=50)
with open("squares.png", "rb") as f:
    head = f.read(8)
print(sorted(n for n in os.listdir(".") if n.endswith(".png")), head)
print(os.path.getsize("squares.png") > 1000, plt.get_fignums())

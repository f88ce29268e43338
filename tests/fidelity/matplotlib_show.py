# requires: matplotlib
# plt.show() under the non-interactive Agg backend (MPLBACKEND=Agg in both).
import matplotlib
import matplotlib.pyplot as plt

print(matplotlib.get_backend())
plt.plot([1, 2], [3, 4])
plt.show()
print("after show", plt.get_fignums())

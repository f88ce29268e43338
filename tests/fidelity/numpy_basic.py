# requires: numpy
import numpy as np

a = np.arange(12, dtype=np.float64).reshape(3, 4)
print(a.mean(axis=0), a.T.shape, a.dtype)
print(np.linalg.det(np.array([[2.0, 1.0], [1.0, 3.0]])).round(6))
rng = np.random.default_rng(42)
print(rng.integers(0, 100, 5))
with np.errstate(divide="ignore"):
    print(np.array([1.0, 0.0]) / 0.0)

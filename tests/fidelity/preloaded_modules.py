# Which heavy libraries a fresh program sees as already imported.
import sys

print([m for m in ("numpy", "pandas", "matplotlib", "matplotlib.pyplot") if m in sys.modules])

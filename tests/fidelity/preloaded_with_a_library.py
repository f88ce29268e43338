# A program that imports a library: which other heavy libraries it sees as imported.
import sys

import numpy

print(numpy.zeros(2).tolist(), [m for m in ("pandas", "matplotlib.pyplot") if m in sys.modules])

# %%
import numpy as np

# %%
readings = np.array([12.1, 11.8, 12.6, 13.0, 12.2, 11.5, 12.9, 12.4])

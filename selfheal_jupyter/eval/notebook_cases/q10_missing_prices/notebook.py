# %%
import numpy as np
import pandas as pd

# %%
products = pd.DataFrame({
    "product": ["kettle", "toaster", "blender", "mixer", "grill", "juicer"],
    "price": [29.99, np.nan, 49.5, np.nan, 89.0, np.nan],
})

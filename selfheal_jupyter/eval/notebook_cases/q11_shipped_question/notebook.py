# %%
import numpy as np
import pandas as pd

# %%
df = pd.DataFrame({
    'region': ['north', 'south', 'north', 'east', 'south', 'east', 'north'],
    'month':  ['jan', 'jan', 'feb', 'feb', 'mar', 'mar', 'mar'],
    'sales':  [120, 80, 95, 60, 130, 75, 110],
})
measure = 'sales'
df.head()

# %%
def share(totals):
    """Each total as a percentage of the sum, one decimal."""
    return np.round(totals / totals.sum() * 100, 1)

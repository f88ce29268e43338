# %%
import pandas as pd

# %%
# Sales per region and month (one row per region and month)
sales = pd.DataFrame({
    "month": ["jan", "jan", "jan", "feb", "feb", "feb", "mar", "mar", "mar"],
    "region": ["north", "south", "west", "north", "south", "west", "north", "south", "west"],
    "sales": [310, 120, 95, 180, 260, 90, 140, 150, 330],
})
sales.head()

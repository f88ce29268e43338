# %%
import pandas as pd

# %%
items = pd.DataFrame({
    "item": ["pen", "notebook", "stapler", "desk lamp", "chair", "marker", "monitor arm"],
    "category": ["stationery", "stationery", "office", "furniture", "furniture", "stationery", "office"],
    "price": [1.5, 3.0, 12.0, 35.0, 120.0, 2.25, 60.0],
})

# %%
import pandas as pd

# %%
revenue = pd.DataFrame({
    "year": [2020, 2021, 2022, 2023],
    "revenue": [80000, 92000, 87400, 104880],
})

# %%
import pandas as pd

# %%
orders = pd.DataFrame({
    "order_id": [101, 102, 103, 104],
    "ordered": ["2024-05-01", "2024-05-02", "2024-05-02", "2024-05-06"],
    "shipped": ["2024-05-03", "2024-05-06", "2024-05-03", "2024-05-08"],
})

# %%
# How long shipping takes
orders["days"] = (orders["shipped"] - orders["ordered"]).dt.days
print("average days to ship:", orders["days"].mean())
print("slowest order:", orders.loc[orders["days"].idxmax(), "order_id"])

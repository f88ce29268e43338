# %%
import pandas as pd

# %%
customers = pd.DataFrame({
    "customer_id": [101, 102, 103, 104],
    "name": ["Maria Lopez", "Tom Berg", "Aiko Sato", "Sven Dahl"],
    "city": ["Madrid", "Oslo", "Osaka", "Oslo"],
})

# %%
orders = pd.DataFrame({
    "order_id": [1, 2, 3, 4, 5, 6, 7],
    "customer_id": [102, 101, 102, 103, 101, 102, 104],
    "amount": [25.0, 40.5, 12.5, 99.0, 10.0, 7.5, 55.25],
})

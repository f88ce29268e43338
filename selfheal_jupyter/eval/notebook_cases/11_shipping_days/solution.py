import pandas as pd

# How long shipping takes
orders["days"] = (pd.to_datetime(orders["shipped"]) - pd.to_datetime(orders["ordered"])).dt.days
print("average days to ship:", orders["days"].mean())
print("slowest order:", orders.loc[orders["days"].idxmax(), "order_id"])

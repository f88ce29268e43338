# %%
import pandas as pd

# %%
usage = pd.DataFrame({
    "month": ["jan", "jan", "jan", "feb", "feb", "mar"],
    "kwh": [10.0, 14.0, 12.0, 9.0, 11.0, 8.0],
})

# %%
# Electricity per month
per_month = usage.groupby("month", sort=False)["kwh"].sum()
for month, kwh in per_month.items():
    print(f"{month}: {kwh:.1f} kWh")

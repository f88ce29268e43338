# %%
import pandas as pd

# %%
# Sales of the first quarter, one row per invoice
sales = pd.DataFrame({
    "date": ["2024-01-03", "2024-01-17", "2024-01-29", "2024-02-02", "2024-02-20",
             "2024-03-05", "2024-03-18", "2024-03-30"],
    "customer": ["acme", "globex", "acme", "initech", "acme", "globex", "initech", "acme"],
    "amount": [120.0, 45.5, 34.5, 80.0, 70.0, 25.5, 30.0, 20.0],
})

# %%
def eur(x):
    """Format an amount as euros."""
    return f"EUR {x:,.2f}"

# %%
# Monthly revenue
sales["month"] = sales["date"].dt.month
by_month = sales.groupby("month")["amount"].sum()
for month, total in by_month.items():
    print(month, eur(total))

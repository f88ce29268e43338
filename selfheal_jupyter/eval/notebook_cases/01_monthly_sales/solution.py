import pandas as pd

# Monthly revenue
sales["month"] = pd.to_datetime(sales["date"]).dt.month
by_month = sales.groupby("month")["amount"].sum()
for month, total in by_month.items():
    print(month, eur(total))

# Electricity per month
per_month = usage.groupby("month", sort=False)["kwh"].mean()
for month, kwh in per_month.items():
    print(f"{month}: {kwh:.1f} kWh")

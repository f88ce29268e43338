totals = orders.merge(customers, on="customer_id").groupby("name")["amount"].sum()
for name, total in totals.items():
    print(f"{name}: {total:.2f}")

counts = orders.merge(customers, on="customer_id").groupby("name").size()
for name, n in counts.items():
    print(name, n)

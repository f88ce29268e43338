for category, avg in items.groupby("category")["price"].mean().sort_values(ascending=False).items():
    print(f"{category}: {avg:.2f}")

best = sales.loc[sales.groupby("month", sort=False)["sales"].idxmax()]
for _, row in best.iterrows():
    print(row["month"], row["region"])

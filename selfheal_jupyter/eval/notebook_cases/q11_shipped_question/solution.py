best = df.loc[df.groupby("month", sort=False)["sales"].idxmax()]
for _, row in best.iterrows():
    print(row["month"], row["region"])

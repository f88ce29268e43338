# requires: pandas
import pandas as pd

df = pd.DataFrame({"city": ["a", "b", "a", "c"], "sales": [10, 20, 30, 5]})
print(df.groupby("city")["sales"].sum())
print(df.describe().loc[["mean", "max"]])
print(df.to_csv(index=False), end="")

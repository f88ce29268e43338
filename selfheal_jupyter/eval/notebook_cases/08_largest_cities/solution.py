# The three largest cities
top = cities.sort_values("population_m", ascending=False).head(3)
assert top.iloc[0]["city"] == "Tokyo"
for _, row in top.iterrows():
    print(f'{row["city"]}: {row["population_m"]} million')

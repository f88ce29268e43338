# %%
import pandas as pd

# %%
cities = pd.DataFrame({
    "city": ["Lagos", "Tokyo", "Lima", "Delhi", "Paris", "Cairo"],
    "population_m": [15.4, 37.2, 10.9, 32.9, 11.2, 22.2],
})

# %%
# The three largest cities
top = cities.sort_values("population_m").head(3)
assert top.iloc[0]["city"] == "Tokyo"
for _, row in top.iterrows():
    print(f'{row["city"]}: {row["population_m"]} million')

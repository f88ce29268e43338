# %%
import pandas as pd

# %%
# Revenue per deal: several deals per region and quarter
deals = pd.DataFrame({
    "region": ["north", "north", "south", "north", "south", "south", "north"],
    "quarter": ["Q1", "Q1", "Q1", "Q2", "Q2", "Q2", "Q2"],
    "revenue": [100, 20, 80, 60, 30, 45, 15],
})

# %%
# Revenue per region and quarter
table = deals.pivot(index="region", columns="quarter", values="revenue")
for region in table.index:
    print(region, int(table.loc[region, "Q1"]), int(table.loc[region, "Q2"]))

# Revenue per region and quarter
table = deals.pivot_table(index="region", columns="quarter", values="revenue", aggfunc="sum")
for region in table.index:
    print(region, int(table.loc[region, "Q1"]), int(table.loc[region, "Q2"]))

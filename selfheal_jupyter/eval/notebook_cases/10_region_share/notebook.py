# %%
import pandas as pd

# %%
revenue = pd.DataFrame({
    "region": ["north", "south", "east", "west"],
    "revenue": [500.0, 250.0, 150.0, 100.0],
})

# %%
def pct(part, whole):
    """part as a percentage of whole."""
    return part / whole * 10

# %%
# Share of each region in the total revenue
total = revenue["revenue"].sum()
shares = {r: pct(v, total) for r, v in zip(revenue["region"], revenue["revenue"])}
for region, share in shares.items():
    print(f"{region}: {share:.1f}%")
assert abs(sum(shares.values()) - 100) < 1e-9

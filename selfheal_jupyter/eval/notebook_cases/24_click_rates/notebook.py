# %%
ads = {
    "spring": {"clicks": 30, "impressions": 1200},
    "summer": {"clicks": 0, "impressions": 0},
    "autumn": {"clicks": 12, "impressions": 400},
}

# %%
# Click-through rate per ad in percent; an ad never shown has a rate of 0
for name, ad in ads.items():
    rate = ad["clicks"] / ad["impressions"] * 100
    print(f"{name}: {rate:.1f}%")

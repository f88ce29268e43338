# Click-through rate per ad in percent; an ad never shown has a rate of 0
for name, ad in ads.items():
    rate = ad["clicks"] / ad["impressions"] * 100 if ad["impressions"] else 0.0
    print(f"{name}: {rate:.1f}%")

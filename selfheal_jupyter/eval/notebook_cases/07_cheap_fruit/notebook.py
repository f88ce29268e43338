# %%
import pandas as pd

# %%
products = pd.DataFrame({
    "name": ["apple", "mango", "bread", "banana", "cheese", "kiwi"],
    "kind": ["fruit", "fruit", "bakery", "fruit", "dairy", "fruit"],
    "price": [0.5, 2.5, 1.8, 0.3, 4.2, 0.6],
})

# %%
# Fruit under 1 euro, cheapest first
cheap_fruit = products[products.price < 1 and products.kind == "fruit"]
for name in cheap_fruit.sort_values("price")["name"]:
    print(name)

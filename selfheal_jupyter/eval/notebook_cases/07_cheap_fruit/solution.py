# Fruit under 1 euro, cheapest first
cheap_fruit = products[(products.price < 1) & (products.kind == "fruit")]
for name in cheap_fruit.sort_values("price")["name"]:
    print(name)

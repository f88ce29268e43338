print(products["price"].isna().sum())

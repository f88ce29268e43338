# %%
scores = {"amira": 78, "bastian": 91, "chloe": 85, "dmitri": 64, "elena": 88}

# %%
import pandas as pd

# %%
rooms = pd.DataFrame({
    "room": ["kitchen", "living", "bed 1", "bed 2", "bath"],
    "width_m": [3.0, 5.5, 4.0, 3.0, 2.0],
    "length_m": [4.0, 6.0, 4.0, 3.5, 2.5],
})

# %%
# Floor area of each room and of the whole flat
rooms["area"] = rooms.apply(lambda r: r["width_m"] * r["length_m"])
print("total area:", rooms["area"].sum())
print("largest room:", rooms.loc[rooms["area"].idxmax(), "room"])

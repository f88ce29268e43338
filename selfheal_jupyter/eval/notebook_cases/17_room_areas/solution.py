# Floor area of each room and of the whole flat
rooms["area"] = rooms.apply(lambda r: r["width_m"] * r["length_m"], axis=1)
print("total area:", rooms["area"].sum())
print("largest room:", rooms.loc[rooms["area"].idxmax(), "room"])

# %%
text = ("Researchers measured the temperature every morning, although the thermometer "
        "occasionally stopped working during particularly cold weeks of February.")

# %%
import pandas as pd

# %%
roster = pd.DataFrame({
    "player": ["ana", "ben", "cas", "dee", "eli", "fay", "gus", "hal"],
    "team": ["red", "blue", "red", "green", "blue", "red", "blue", "red"],
})

# %%
# Players per team, biggest team first
sizes = roster.groupby("team").count()["players"].sort_values(ascending=False)
for team, n in sizes.items():
    print(team, n)

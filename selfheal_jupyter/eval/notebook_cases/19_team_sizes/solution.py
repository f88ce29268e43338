# Players per team, biggest team first
sizes = roster.groupby("team").count()["player"].sort_values(ascending=False)
for team, n in sizes.items():
    print(team, n)

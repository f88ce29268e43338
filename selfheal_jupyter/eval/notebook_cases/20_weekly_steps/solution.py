import pandas as pd

# Steps per week (weeks end on Sunday)
weekly = steps.set_index(pd.to_datetime(steps["day"]))["steps"].resample("W").sum()
for week_end, total in weekly.items():
    print(week_end.date(), total)

# %%
import pandas as pd

# %%
# Steps per day from the phone's export (dates as text)
steps = pd.DataFrame({
    "day": ["2024-06-03", "2024-06-04", "2024-06-05", "2024-06-06", "2024-06-07",
            "2024-06-08", "2024-06-09", "2024-06-10", "2024-06-11", "2024-06-12"],
    "steps": [8000, 6500, 9100, 7200, 10400, 12000, 3000, 7600, 8800, 5400],
})

# %%
# Steps per week (weeks end on Sunday)
weekly = steps.set_index("day")["steps"].resample("W").sum()
for week_end, total in weekly.items():
    print(week_end.date(), total)

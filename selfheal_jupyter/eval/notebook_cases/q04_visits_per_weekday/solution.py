import pandas as pd

days = pd.to_datetime(visits["date"]).dt.day_name()
for day, n in days.value_counts().items():
    print(day, n)

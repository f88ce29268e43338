# %%
import pandas as pd

# %%
# Visits to the library, one row per visit (dates as read from the sign-in sheet)
visits = pd.DataFrame({
    "date": ["2024-05-06", "2024-05-06", "2024-05-07", "2024-05-08", "2024-05-08",
             "2024-05-08", "2024-05-10", "2024-05-13", "2024-05-14", "2024-05-17"],
    "visitor": ["ann", "bo", "cy", "ann", "dee", "bo", "cy", "ann", "bo", "dee"],
})

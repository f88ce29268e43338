# %%
import pandas as pd

# %%
students = pd.DataFrame({
    "id": [1, 2, 3, 4, 5, 6],
    "name": ["Ana", "Ben", "Cas", "Dee", "Eli", "Fay"],
    "group": ["A", "A", "B", "B", "B", "A"],
})
grades = pd.DataFrame({
    "student_id": [1, 2, 3, 4, 5, 6],
    "grade": [7.5, 6.0, 8.0, 5.5, 9.0, 7.0],
})

# %%
# Average grade per group
merged = students.merge(grades, on="id")
assert len(merged) == 6, "every student has a grade"
for group, avg in merged.groupby("group")["grade"].mean().items():
    print(f"group {group}: {avg:.2f}")

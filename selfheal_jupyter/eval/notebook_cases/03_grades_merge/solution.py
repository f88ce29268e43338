# Average grade per group
merged = students.merge(grades, left_on="id", right_on="student_id")
assert len(merged) == 6, "every student has a grade"
for group, avg in merged.groupby("group")["grade"].mean().items():
    print(f"group {group}: {avg:.2f}")

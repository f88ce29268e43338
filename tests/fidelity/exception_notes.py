def load(row):
    try:
        return int(row["age"])
    except ValueError as e:
        e.add_note(f"while loading row {row['id']}")
        e.add_note("hint: age must be a whole number")
        raise


print("loading")
load({"id": 7, "age": "seven"})

for book in sorted((b for b in library if b["year"] < 1950), key=lambda b: b["year"]):
    print(book["title"])

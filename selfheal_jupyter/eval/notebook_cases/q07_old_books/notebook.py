# %%
library = [
    {"title": "Dune", "author": "Frank Herbert", "year": 1965},
    {"title": "Brave New World", "author": "Aldous Huxley", "year": 1932},
    {"title": "Nineteen Eighty-Four", "author": "George Orwell", "year": 1949},
    {"title": "Neuromancer", "author": "William Gibson", "year": 1984},
    {"title": "The Hobbit", "author": "J. R. R. Tolkien", "year": 1937},
]

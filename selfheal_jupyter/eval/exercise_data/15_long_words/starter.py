# Exercise 15 - Long words
# ------------------------
# `long_words(text, n)` returns the words of the text that have MORE than n
# letters, in the order they first appear, each only once, in lower case.
#
# Don't touch the teacher's checks.

poem = "The quick brown fox jumps over the lazy dog and the quick cat"


def long_words(text, n):
    found = []
    for word in text.split():
        # TODO: lower case, more than n letters, no duplicates
        if len(word) >= n:
            found.append(word)
    return found


print(long_words(poem, 4))

# checks (do not change)
assert long_words(poem, 4) == ["quick", "brown", "jumps"]
assert long_words("Apple apple", 3) == ["apple"]
assert long_words("a bb", 5) == []

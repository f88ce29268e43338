# Exercise 5 - Word frequencies
# -----------------------------
# `word_counts(text)` returns a dict {word: count}. Words are compared in lower
# case and the punctuation . , ! ? is removed first.
# `most_common(text)` returns the most frequent word.
#
# Do not edit the teacher's asserts.

text = "The cat sat. The cat ran! A dog sat, the end?"


def word_counts(text):
    counts = {}
    # TODO: remove the punctuation and lower-case the words
    for word in text.split():
        counts[word] += 1
    return counts


def most_common(text):
    counts = word_counts(text)
    # TODO: return the word with the highest count
    return None


print(word_counts(text))
print("most common:", most_common(text))

# teacher's asserts (do not change)
assert word_counts("a b a") == {"a": 2, "b": 1}
assert word_counts(text)["the"] == 3
assert word_counts(text)["sat"] == 2
assert most_common(text) == "the"

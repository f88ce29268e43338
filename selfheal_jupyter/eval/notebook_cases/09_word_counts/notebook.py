# %%
from collections import Counter

# %%
text = """The cat sat on the mat. The dog sat on the log.
A cat and a dog: the best of friends."""

# %%
def tokens(s):
    """Lower-case words without punctuation."""
    cleaned = "".join(ch.lower() if ch.isalpha() else " " for ch in s)
    return cleaned.split()

# %%
# The three most common words
counts = Counter(tokens(text))
for word, n in counts.most_common[3]:
    print(word, n)

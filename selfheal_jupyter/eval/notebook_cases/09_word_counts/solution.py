# The three most common words
counts = Counter(tokens(text))
for word, n in counts.most_common(3):
    print(word, n)

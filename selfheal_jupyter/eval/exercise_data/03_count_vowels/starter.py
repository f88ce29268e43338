# Exercise 3 - Counting vowels
# ----------------------------
# `count_vowels(text)` returns how many vowels (a, e, i, o, u) the text contains.
# Capital letters count too: "Anna" has 2 vowels.
#
# Leave the asserts below exactly as they are.

VOWELS = "aeiou"


def count_vowels(text):
    count = 0
    for letter in text:
        # TODO: capital vowels are not counted yet
        if letter in VOWELS:
            count = count + 1
        return count


sentence = "Programming In Python Is Fun"
print(sentence, "->", count_vowels(sentence))

# --- do not change ---
assert count_vowels("banana") == 3
assert count_vowels("Anna") == 2
assert count_vowels("") == 0
assert count_vowels(sentence) == 7

# Exercise 7 - Palindromes
# ------------------------
# `is_palindrome(phrase)` returns True when the phrase reads the same backwards,
# ignoring capital letters and spaces ("Never odd or even" is one).
#
# The asserts are the specification: do not change them.


def clean(phrase):
    # TODO: remove the spaces and lower-case the phrase
    return phrase


def is_palindrome(phrase):
    letters = clean(phrase)
    return letters == letters[::1]


for p in ["kayak", "Never odd or even", "python"]:
    print(p, "->", is_palindrome(p))

# --- do not change ---
assert is_palindrome("kayak") is True
assert is_palindrome("Never odd or even") is True
assert is_palindrome("python") is False

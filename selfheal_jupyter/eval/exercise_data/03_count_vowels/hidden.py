assert count_vowels("AEIOU") == 5
assert count_vowels("rhythm") == 0
assert count_vowels("Hello World") == 3
assert count_vowels("a" * 50) == 50

assert long_words("", 1) == []
assert long_words("Hello hello HELLO world", 4) == ["hello", "world"]
assert long_words("abc abcd", 3) == ["abcd"]
assert long_words("one two three", 0) == ["one", "two", "three"]

assert is_palindrome("") is True
assert is_palindrome("A") is True
assert is_palindrome("Step on no pets") is True
assert is_palindrome("ab") is False
assert is_palindrome("Was it a car or a cat I saw") is True

# Exercise 19 - Caesar cipher
# ---------------------------
# `encrypt(text, shift)` moves every letter `shift` places in the alphabet,
# wrapping around after "z"; upper case stays upper case, other characters are
# unchanged. `decrypt(text, shift)` undoes it.
#
# Do not change the checks at the end.

ALPHABET = "abcdefghijklmnopqrstuvwxyz"


def encrypt(text, shift):
    out = ""
    for ch in text:
        if ch.lower() in ALPHABET:
            # TODO: wrap around the end of the alphabet and keep upper case
            index = (ALPHABET.index(ch.lower()) + shift) % 26
            out += ALPHABET[index].upper() if ch.isupper() else ALPHABET[index]
        else:
            out += ch
    return out


def decrypt(text, shift):
    return encrypt(text, -shift)


secret = encrypt("Hello, World!", 3)
print(secret, "->", decrypt(secret, 3))

# checks (do not change)
assert encrypt("abc", 1) == "bcd"
assert encrypt("xyz", 3) == "abc"
assert encrypt("Hi!", 1) == "Ij!"
assert decrypt(encrypt("Secret Message", 7), 7) == "Secret Message"

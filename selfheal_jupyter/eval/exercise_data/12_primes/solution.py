# Exercise 12 - Prime numbers
# ---------------------------
# `is_prime(n)` tells whether n is prime (1 and numbers below are not).
# `primes_up_to(n)` returns the primes from 2 to n included.
#
# The teacher's checks at the end must not be changed.


def is_prime(n):
    if n < 2:
        return False
    for d in range(2, n):
        if n % d == 0:
            return False
    return True


def primes_up_to(n):
    return [k for k in range(n + 1) if is_prime(k)]


print(primes_up_to(30))

# checks (do not change)
assert is_prime(7) is True
assert is_prime(1) is False
assert is_prime(9) is False
assert primes_up_to(13) == [2, 3, 5, 7, 11, 13]

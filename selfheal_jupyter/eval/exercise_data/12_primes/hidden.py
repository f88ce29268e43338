assert is_prime(2) is True and is_prime(0) is False and is_prime(-7) is False
assert is_prime(97) is True and is_prime(91) is False
assert primes_up_to(1) == []
assert primes_up_to(2) == [2]
assert len(primes_up_to(100)) == 25

# Exercise 4 - FizzBuzz
# ---------------------
# `fizzbuzz(n)` returns a list of strings for the numbers 1..n (n included):
# "Fizz" for multiples of 3, "Buzz" for multiples of 5, "FizzBuzz" for multiples
# of both, otherwise the number itself as a string.
#
# The checks at the end are given: do not modify them.


def fizzbuzz(n):
    result = []
    for i in range(1, n):
        if i % 3 == 0:
            result.append("Fizz")
        elif i % 5 == 0:
            result.append("Buzz")
        # TODO: multiples of both 3 and 5
        else:
            result.append(i)
    return result


print(fizzbuzz(15))

# checks - do not change
assert fizzbuzz(5) == ["1", "2", "Fizz", "4", "Buzz"]
assert fizzbuzz(15)[-1] == "FizzBuzz"
assert len(fizzbuzz(30)) == 30

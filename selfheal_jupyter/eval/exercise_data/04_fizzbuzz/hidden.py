assert fizzbuzz(0) == []
assert fizzbuzz(1) == ["1"]
out = fizzbuzz(45)
assert out[29] == "FizzBuzz" and out[44] == "FizzBuzz" and out[8] == "Fizz" and out[9] == "Buzz"
assert out[6] == "7"

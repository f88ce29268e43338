counter = 10
print(countr + 1)

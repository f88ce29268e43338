for i in range(20000):
    print(i, i * i, "x" * (i % 17))

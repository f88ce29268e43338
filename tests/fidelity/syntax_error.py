print("this never prints")
values = [1, 2, 3
print(values)

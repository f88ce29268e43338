def ask():
    return int(input("How many? "))


print("asking")
n = ask()
print("never", n)

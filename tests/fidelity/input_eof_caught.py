try:
    name = input("Your name? ")
except EOFError as e:
    print("\ngot EOFError:", e)

# The working directory is the program's directory, and writable.
import os

with open("out.txt", "w") as f:
    f.write("data\n")
print(sorted(os.listdir(".")))
with open("out.txt") as f:
    print(f.read(), end="")

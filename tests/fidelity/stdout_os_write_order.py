# print() to a pipe is block-buffered: os.write(1, ...) overtakes it.
import os

print("printed first")
os.write(1, b"written second, arrives first\n")
print("printed third")

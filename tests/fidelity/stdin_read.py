import sys

print(repr(sys.stdin.read()), sys.stdin.isatty(), sys.stdin.closed)
print(repr(sys.stdin.readline()), list(sys.stdin))

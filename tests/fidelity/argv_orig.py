# The command line Python itself saw (minus the interpreter's path).
import sys

print(sys.orig_argv[1:])

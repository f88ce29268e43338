# os._exit skips clean-up: buffered output to a pipe is lost, atexit does not run.
import atexit
import os
import sys

atexit.register(print, "atexit must not run")
print("buffered, lost")
sys.stderr.write("stderr is line-buffered, kept\n")
os._exit(5)

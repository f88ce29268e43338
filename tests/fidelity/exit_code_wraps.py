# The exit status is the code modulo 256, as the operating system keeps it.
import sys

print("exiting with 256")
sys.exit(256)

import sys

print("before exit")
sys.exit(3)
print("never")

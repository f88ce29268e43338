import sys

print("about to fail")
sys.exit("fatal: configuration missing")

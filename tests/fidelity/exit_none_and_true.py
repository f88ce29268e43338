# sys.exit(True) is exit code 1 (bool is an int); nothing is printed for it.
import sys

try:
    sys.exit(None)
except SystemExit as e:
    print("code:", e.code)
sys.exit(True)

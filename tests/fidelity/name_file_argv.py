# __name__, __file__ and sys.argv as for `python3 FILE` run from the file's directory.
import os
import sys

print(__name__)
print(os.path.basename(__file__), os.path.isabs(__file__), os.path.exists(__file__))
print(os.path.dirname(__file__) == os.getcwd())
print(sys.argv)
print(sys.path[0] == os.getcwd())
if __name__ == "__main__":
    print("main block ran")

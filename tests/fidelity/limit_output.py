# 2 MiB of output.
import sys

line = "y" * 1023 + "\n"
for _ in range(2048):
    sys.stdout.write(line)

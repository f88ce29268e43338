# The standard streams of `python3 FILE > pipe 2> pipe < /dev/null`.
import sys

print(sys.stdout.isatty(), sys.stderr.isatty(), sys.stdin.isatty())
print(sys.stdout.line_buffering, sys.stderr.line_buffering)
print(sys.stdout.encoding, sys.stdout.errors, sys.stderr.errors)
print(sys.stdout is sys.__stdout__, sys.stdout.fileno(), sys.stderr.fileno(), sys.stdin.fileno())

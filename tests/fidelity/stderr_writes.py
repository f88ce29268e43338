import sys

sys.stderr.write("a raw stderr write\n")
print("to stderr via print", file=sys.stderr)
sys.stderr.write("no newline at the end")
print("stdout line")

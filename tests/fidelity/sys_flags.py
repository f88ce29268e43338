import sys

f = sys.flags
print(f.optimize, f.dont_write_bytecode, f.no_site, f.isolated, f.ignore_environment)
print(f.inspect, f.interactive, f.dev_mode, f.safe_path, f.utf8_mode, f.hash_randomization)
print(__debug__, hasattr(sys, "ps1"), sys.getrecursionlimit())

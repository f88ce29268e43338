# In __main__, __builtins__ is the builtins module; site's helpers exist.
import builtins

print(type(__builtins__).__name__, __builtins__ is builtins)
print(repr(exit), repr(quit))
print(all(callable(getattr(builtins, n)) for n in ("exit", "quit", "help", "copyright")))
print(builtins.__dict__.get("__import__") is __import__)

# The program IS the __main__ module.
import sys

main = sys.modules["__main__"]
print(main.__dict__ is globals())
print(locals() is globals())
print(main.__name__, __spec__, __package__)
print(type(__loader__).__name__, __loader__.name)
print(__cached__)
MARK = object()
print(getattr(main, "MARK") is MARK)

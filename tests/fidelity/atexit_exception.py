# A failing atexit handler is reported and ignored; the exit code stays 0.
import atexit


def bad():
    raise RuntimeError("handler failed")


atexit.register(print, "runs after the failing one")
atexit.register(bad)
print("main done")

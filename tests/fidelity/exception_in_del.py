# An exception in __del__ is reported through sys.unraisablehook and ignored.
class Handle:
    def __del__(self):
        raise ValueError("close failed")


h = Handle()
del h
print("program goes on")

# Objects still referenced by the module are finalized when Python shuts down.
import weakref


class Resource:
    def __del__(self):
        print("__del__ at shutdown")


keep = Resource()
class Token:
    pass


token = Token()
weakref.finalize(token, print, "weakref.finalize at exit")
print("end of program")

import inspect
import sys


def greet(name):
    """Say hello."""
    return f"hello {name}"


class Thing:
    def method(self):
        return 42


print(inspect.getsource(greet), end="")
print(inspect.getsource(Thing.method).strip())
print(inspect.getsourcelines(Thing)[1], inspect.getdoc(greet))
print(inspect.getsource(sys.modules[__name__]).count("\n"))

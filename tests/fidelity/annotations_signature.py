# inspect.signature sees the annotation objects themselves (no string annotations).
import inspect


def f(a: int, b: "list[str]" = None) -> str:
    return str(a)


params = inspect.signature(f).parameters
print(params["a"].annotation == int, params["a"].annotation)
print(params["b"].annotation)
print(inspect.signature(f).return_annotation is str)
print(f.__annotations__)
assert inspect.signature(f).parameters["a"].annotation == int

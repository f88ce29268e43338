# Module annotations and code compiled by the program inherit no future flags.
import __future__

x: int = 1
y: "str"
print(__annotations__)
ns = {}
exec("def g(a: int) -> float: pass", ns)
print(ns["g"].__annotations__)
code = compile("def h(a: int): pass", "<string>", "exec")
print(bool(code.co_flags & __future__.annotations.compiler_flag))

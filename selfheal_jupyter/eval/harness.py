"""Build the hidden-test program that runs in the sandbox for the final score.

Why a generated program: the benchmark's grader must run next to the candidate, in
the sandbox, never on the host. The candidate is executed as its own module (so
dataclasses and pickling work), the grader runs after it and prints a random nonce
only when everything passed; the candidate cannot know the nonce, so it cannot fake
a pass by printing or by exiting early.
"""

from __future__ import annotations

import json

_TEMPLATE = '''\
import sys as _sys, types as _types, json as _json
_sys.setrecursionlimit(max(_sys.getrecursionlimit(), 3000))
{modules}
_cand = _types.ModuleType({module_name!r})
_cand.__file__ = "candidate.py"
_sys.modules[{module_name!r}] = _cand
exec(compile({prelude!r}, "prelude.py", "exec"), _cand.__dict__)
exec(compile({code!r}, "candidate.py", "exec"), _cand.__dict__)
_check_ns = dict(_cand.__dict__, _sys=_sys, _json=_json)
_check_ns.update({{k: v for k, v in globals().items() if k in {inputs!r}}})
exec(compile({check!r}, "hidden_check.py", "exec"), _check_ns)
print({nonce!r})
'''

_MODULE = '''\
_m = _types.ModuleType({name!r})
_m.__path__ = []
_sys.modules[{name!r}] = _m
exec(compile({source!r}, {filename!r}, "exec"), _m.__dict__)
if "." in {name!r}:
    setattr(_sys.modules[{name!r}.rsplit(".", 1)[0]], {name!r}.rsplit(".", 1)[1], _m)
'''


def program(
    code: str,
    check: str,
    nonce: str,
    *,
    prelude: str = "",
    module_name: str = "candidate",
    modules: dict[str, str] | None = None,
    inputs: list[str] | tuple[str, ...] = (),
) -> str:
    """The whole hidden-test program.

    ``prelude`` runs first in the candidate's module (e.g. HumanEval's prompt, for the
    helpers it defines); ``check`` runs after the candidate in the same namespace and
    must raise on failure (it sees ``_sys`` and ``_json``); ``modules`` maps module
    names to sources the grader imports (parents first); ``inputs`` are sandbox
    globals copied into the check's namespace.
    """
    mods = "".join(
        _MODULE.format(name=name, source=src, filename=name.replace(".", "/") + ".py")
        for name, src in (modules or {}).items()
    )
    return _TEMPLATE.format(
        modules=mods,
        module_name=module_name,
        prelude=prelude,
        code=code,
        check=check,
        nonce=nonce,
        inputs=list(inputs),
    )


def json_literal(value: object) -> str:
    """A Python expression for a JSON-able value (for embedding in generated code)."""
    return f"_json.loads({json.dumps(value)!r})"

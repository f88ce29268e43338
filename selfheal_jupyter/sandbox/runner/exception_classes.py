"""Exceptions and classes as they cross between the program and the checker.

A class travels as the names that lead back to it (``class_name``: names a class gives
itself never make it another module's class); an exception as data (``describe_exception``);
on the other side it becomes a builtin exception, or a stand-in class made from that data
alone (``stand_in_class``). Nothing here loads a class by a name the other side sent, but
for ``local_class``, which finds one already loaded in this process.
"""

import builtins
import sys
from typing import Any

from .describe import safe_str

#: The builtin exception classes, taken when the runner starts (before any program or
#: test): an exception from the program becomes one of these, or a stand-in below one.
BUILTIN_EXCEPTIONS = {
    name: obj for name, obj in vars(builtins).items() if isinstance(obj, type) and issubclass(obj, BaseException)
}


def _builtin_base(cls: type) -> type:
    for base in cls.__mro__:
        if BUILTIN_EXCEPTIONS.get(base.__name__) is base:
            return base
    return Exception


#: The module a class is said to be of when its names are not where they lead (a class
#: that renamed itself ``builtins.ValueError``): no class on the other side has it.
UNVERIFIED = "<unverified>"


def class_name(klass: Any) -> "tuple[str, str]":
    """``(module, qualname)`` of a class, as its names say only when they lead back to it
    (``local_class``) or it is of ``__main__`` (names no class of a module has): the
    names a class gives itself (``__module__``, ``__qualname__`` may be set to anything)
    never make it another module's class."""
    module, qualname = str(getattr(klass, "__module__", "")), str(getattr(klass, "__qualname__", ""))
    if module == "__main__" or local_class(f"{module}:{qualname}") is klass:
        return module, qualname
    return UNVERIFIED, qualname


def class_names(cls: Any) -> list:
    """``module:qualname`` of each class of an MRO (``class_name``): strings the other
    side only compares."""
    try:
        mro = type.__dict__["__mro__"].__get__(cls)
    except Exception:
        return []
    return [":".join(class_name(k)) for k in mro[:64]]


def describe_class(cls: type) -> dict:
    """An exception class as data: its name, the names of its own classes down to the
    builtin it derives from (``chain``), that builtin's name, and the names of its
    whole MRO (for type checks only)."""
    base = _builtin_base(cls)
    chain = []
    for klass in cls.__mro__:
        if klass is base:
            break
        chain.append(list(class_name(klass)))
    module, name = class_name(cls)
    return {
        "module": module,
        "name": name,
        "base": base.__name__,
        "chain": chain[:8],
        "names": class_names(cls),
    }


def describe_exception(exc: BaseException) -> dict:
    """An exception as it crosses the RPC (either way). ``token``: the exception is one
    a function of the tests raised (a callback), going back to them."""
    info = {**describe_class(type(exc)), "message": safe_str(exc)}
    try:
        token = exc.__dict__.get("__selfheal_token__")
    except Exception:
        token = None
    if type(token) is int:
        info["token"] = token
    return info


_STAND_INS: dict = {}


def stand_in_class(info: dict) -> type:
    """The class on this side for an exception class the other side described, by
    nothing but data: a builtin exception itself, else a stand-in made here (one per
    chain of names) below the builtin it derives from."""
    module, name = str(info.get("module")), str(info.get("name"))
    builtin = BUILTIN_EXCEPTIONS.get(name)
    if module == "builtins" and builtin is not None:
        return builtin
    parent = BUILTIN_EXCEPTIONS.get(str(info.get("base")), Exception)
    chain = info.get("chain")
    if not isinstance(chain, list) or not chain:
        chain = [[module, name]]
    names = info.get("names")
    names = tuple(str(n) for n in names[:64]) if isinstance(names, list) else ()
    for item in reversed(chain[:8]):
        mod, qualname = (str(part) for part in (list(item) + ["", ""])[:2])
        key = (mod, qualname, parent)
        if key not in _STAND_INS:
            short = qualname.rsplit(".", 1)[-1]
            _STAND_INS[key] = type(
                short if short.isidentifier() else "ProgramError",
                (_with_message(parent),),
                {"__module__": mod, "__qualname__": qualname, "__selfheal_names__": ()},
            )
        parent = _STAND_INS[key]
    if names and not claimed_names(parent):
        parent.__selfheal_names__ = names  # type: ignore[attr-defined]
    return parent


def is_stand_in(cls: Any) -> bool:
    """``cls`` is a stand-in made here for an exception class of the other side."""
    try:
        return "__selfheal_names__" in type.__dict__["__dict__"].__get__(cls)
    except Exception:
        return False


def claimed_names(cls: Any) -> tuple:
    """The names a stand-in's class was described with (its MRO on the other side)."""
    try:
        names = type.__dict__["__dict__"].__get__(cls).get("__selfheal_names__", ())
    except Exception:
        return ()
    return names if isinstance(names, tuple) else ()


def _with_message(cls: type) -> type:
    """``cls``, or its nearest base that is made from a message alone (not, e.g.,
    UnicodeDecodeError or ExceptionGroup)."""
    for klass in cls.__mro__:
        try:
            klass("message")
            return klass
        except Exception:
            continue
    return Exception


def raise_as(cls: type, info: dict) -> None:
    """Raise an exception of ``cls`` with the message (and token) ``info`` carries."""
    exc = _with_message(cls)(str(info.get("message", "")))
    if type(info.get("token")) is int:
        exc.__selfheal_token__ = info["token"]  # type: ignore[attr-defined]
    raise exc


def local_class(spec: str) -> "type | None":
    """A class of a module already loaded in this process, by ``module:qualname``."""
    module, _, qualname = spec.partition(":")
    if not module or module == "__main__" or not qualname:
        return None
    target: Any = sys.modules.get(module)
    if target is None:
        return None
    for part in qualname.split("."):
        target = getattr(target, part, None)
    return target if isinstance(target, type) else None

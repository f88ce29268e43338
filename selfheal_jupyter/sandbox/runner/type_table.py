"""The types that cross by name: one fixed table, frozen before any program runs.

A class is not data, yet the user's asserts compare classes all the time
(``sig.return_annotation == str``, ``type(x) is float``). The builtin types and the
standard library's cross by a name of this table: the program's side finds a class's
name by the class's identity (never by the names a class gives itself, which a program
may set to anything), and the checker's side turns the name back into its own object,
found in its own copy of the same table. The table holds the classes of a fixed list
of modules, and the forms of ``typing``, as they are when a template starts, before
any program could rebind a module's name; a name that is not in it is refused. So no
program can add a name, make a name mean another class, or make the checker load
anything. A class of any other module (the program's own, a library's) crosses as a
handle instead (``checker_rpc.Remote``), compared by identity.
"""

import importlib
import sys
import typing
from typing import Any

#: The modules whose public classes cross by name, in the order that picks a class's
#: name when it has several (``builtins.str`` before ``typing.Text``). Imported with the
#: runner; numpy and pandas only where the template preloaded them.
TYPE_MODULES = (
    "builtins",
    "types",
    "collections",
    "collections.abc",
    "numbers",
    "abc",
    "enum",
    "dataclasses",
    "datetime",
    "decimal",
    "fractions",
    "uuid",
    "pathlib",
    "re",
    "io",
    "functools",
    "itertools",
    "inspect",
    "typing",
    "numpy",
    "pandas",
)
#: The forms of ``typing`` that cross by name, bare (``typing.List``) or subscripted
#: (``typing.List[int]``, ``typing.Optional[str]``, which is a ``Union``).
TYPING_FORMS = (
    "Union",
    "Optional",
    "List",
    "Dict",
    "Set",
    "FrozenSet",
    "Tuple",
    "Type",
    "Callable",
    "Iterable",
    "Iterator",
    "Sequence",
    "MutableSequence",
    "Mapping",
    "MutableMapping",
    "AbstractSet",
    "MutableSet",
    "Collection",
    "Container",
    "Sized",
    "Hashable",
    "Reversible",
    "Generator",
    "Deque",
    "DefaultDict",
    "OrderedDict",
    "Counter",
    "ChainMap",
    "Literal",
    "ClassVar",
    "Final",
    "NoReturn",
    "Never",
    "LiteralString",
    "Self",
)
for _name in TYPE_MODULES:  # the standard library's, with the runner: in every template's table
    if _name.partition(".")[0] in sys.stdlib_module_names:
        importlib.import_module(_name)


class TypeTable:
    """Names of classes and of ``typing``'s forms, both ways; frozen once per process
    tree (``freeze``, in each template), or at first use."""

    def __init__(self) -> None:
        self._names: dict[int, str] = {}  # id of a class -> its name
        self._classes: dict[str, type] = {}  # every name of every class -> the class
        self._form_names: dict[int, str] = {}  # id of a bare typing form -> its name
        self._forms: dict[str, Any] = {}
        self._frozen = False

    def freeze(self) -> None:
        """Read the table from the modules as they are now (before any program)."""
        if self._frozen:
            return
        self._frozen = True
        for module_name in TYPE_MODULES:
            module = sys.modules.get(module_name)
            if module is None:
                continue
            for attr, obj in sorted(vars(module).items()):
                if attr.startswith("_") or not isinstance(obj, type):
                    continue
                if issubclass(obj, BaseException):
                    continue  # exceptions cross as described classes (``codec.describe_class``)
                name = f"{module_name}.{attr}"
                self._classes[name] = obj
                self._names.setdefault(id(obj), name)
        for name in TYPING_FORMS:
            form = getattr(typing, name, None)
            if form is not None and not isinstance(form, type):
                self._forms[name] = form
                self._form_names.setdefault(id(form), name)

    def name_of(self, cls: Any) -> "str | None":
        """The table's name for this very class (None: not in the table)."""
        self.freeze()
        name = self._names.get(id(cls))
        return name if name is not None and self._classes[name] is cls else None

    def class_named(self, name: Any) -> type:
        """This process's class of that name; ValueError for a name not in the table."""
        self.freeze()
        found = self._classes.get(name) if type(name) is str else None
        if found is None:
            raise ValueError("a type that is not in the runner's table of types")
        return found

    def form_name_of(self, form: Any) -> "str | None":
        """The name of a bare form of ``typing`` (``typing.List``, ``typing.Optional``)."""
        self.freeze()
        name = self._form_names.get(id(form))
        return name if name is not None and self._forms[name] is form else None

    def is_form(self, name: Any) -> bool:
        self.freeze()
        return type(name) is str and name in self._forms

    def form_named(self, name: Any) -> Any:
        self.freeze()
        found = self._forms.get(name) if type(name) is str else None
        if found is None:
            raise ValueError("a form of typing that is not in the runner's table")
        return found


#: The one table of this process (frozen by the template, inherited by its children).
TYPES = TypeTable()

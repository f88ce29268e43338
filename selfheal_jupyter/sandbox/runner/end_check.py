"""The user's asserts that held must still describe the program when it ends.

An assert is checked on the values the program has where it stands. A program that
then binds a name the assert read to another function (``globals()['mean'] = ...``,
``exec``, the module object: nothing the spec guard can see in the text) would end with
code the assert never checked. So the checker keeps, for each assert that held, the
handles of the callables it read (functions, classes: what a test tests), and reads the
same names again when the program has ended: a name bound to another object, or to none,
fails that assert. Plain values may change after an assert (``x += 1``): they are data.
A name the text shows bound again after the assert (a later top-level ``def``,
assignment or import, a ``global`` declaration) is not held: the spec guard judges that
from the source (a rebinding the user's own code has, a memoised redefinition or a
decorator applied afterwards, is the user's spec; a new one is a violation), so the
checker leaves it out (``checker``).

Identity is the checker's own: the program's side gives one reference per object and
keeps every object it referenced alive, so an equal handle is the same object. When the
end cannot be seen (the program's process did not say it was ready), nothing confirms
the assert: the run's outcome fails it unless the run failed anyway (``outcome``)."""

from typing import Any

from .checker_rpc import ProgramLink, Remote

#: The key of an assert's outcome whose held names could not be read at the end; the
#: server's ``outcome`` fails it when the run is otherwise ``ok`` and drops the key.
UNCONFIRMED = "unconfirmed"


class HeldNames:
    """The callables each passed assert read, to be found unchanged at the program's end."""

    def __init__(self) -> None:
        self.held: list[tuple[dict, dict[str, Remote]]] = []

    def keep(self, outcome: dict, before: dict, after: "dict[str, object]") -> None:
        """An assert held: keep the program's callables it read (``before``: its names as
        fetched; ``after``: as they are once it ran — a name its own code bound is not
        the program's)."""
        names: dict[str, Remote] = {}
        for name, value in before.items():
            if type(value) is Remote and value._callable() and after.get(name) is value:
                names[name] = value
        if names:
            self.held.append((outcome, names))

    def confirm(self, link: ProgramLink, ended: bool, why: str) -> None:
        """At the program's end (``ended``: it is waiting, its names readable), fail each
        assert whose callables were bound again; else mark them unconfirmed (``why``)."""
        if not self.held:
            return
        now: Any = None
        if ended:
            try:
                now = link.ask("names", names=sorted({n for _, names in self.held for n in names}))
            except Exception as exc:
                why = f"its names could not be read ({exc})"
        for outcome, names in self.held:
            listed = ", ".join(f"`{n}`" for n in sorted(names))
            if not isinstance(now, dict):
                outcome[UNCONFIRMED] = (
                    f"{listed} could not be read again at the program's end ({why}), so "
                    "nothing shows this assert still describes the program. Let the program "
                    "run to its end (no os._exit)."
                )
                continue
            gone = sorted(n for n in names if n not in now)
            moved = sorted(n for n, held in names.items() if n in now and now[n] is not held)
            if gone or moved:
                what = [f"`{n}` was replaced" for n in moved] + [f"`{n}` was deleted" for n in gone]
                outcome.update(
                    passed=False,
                    message=(
                        f"{' and '.join(what)} after this assert held (line {outcome['line']}): the "
                        "assert no longer describes the program. Fix the code above the assert; "
                        "do not bind what it checks again after it."
                    ),
                )

"""``%%agent``, ``%%heal``, ``%%hint``, ``%agent_autoheal`` and ``%agent_export``: declarations.

Each magic parses its arguments (``arguments.py`` turns them into settings and a
task) and hands the run to the controller (``controller.CellRun``), which renders it,
stores the record in ``agent_result`` and offers the passing code. Nothing else in the
user's namespace changes unless the user presses Insert / Replace / Run in my kernel
(``--plan-only`` stores the plan it was asked for). In a kernel the cell awaits the
run (``controller.install``), so Stop works while it lasts; the cell ends when it ends.
Each cell magic is written once, as a coroutine that waits through a
:class:`~selfheal_jupyter.runner.pump.Wait`; the magic IPython calls and its awaited
form (``*_async``) are one-line adapters of it (nbclient's ``run_sync`` pattern).
``%%hint`` hands its cell to teaching mode (``teaching.py``) instead. Every entry point
asks the instructor's policy first (``policy.kernel_gate``).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring

from ..config import SelfHeal
from ..errors import SelfHealError
from ..flags import magic_arguments as magic_arguments_for
from ..loop.task_admission import check_shape
from ..model import Run, Task
from ..render.html import plan_html
from ..render.inline import show_html
from ..runner import AWAITING, BLOCKING, Wait, run_sync
from ..teaching.policy import kernel_gate
from . import arguments, autoheal, controller, teaching

PLAN_NAME = "agent_plan"
HEAL_FLAGS = ("max_iterations", "model", "timeout", "memory", "quiet")
"""The SelfHeal options %%heal offers as flags (selfheal_jupyter.flags); %%agent adds --no-plan."""
AGENT_FLAGS = (*HEAL_FLAGS, "no_plan")


def _common_options(func: Any) -> Any:
    """Options shared by %%agent and %%heal (applied bottom-up, shown top-down)."""
    decorators: list[Callable[[Any], Any]] = [
        *magic_arguments_for(("max_iterations", "model")),
        argument(
            "--inputs",
            metavar="A,B",
            help="Notebook variables copied into the sandbox (the model sees names, "
            "types, shapes and columns, never the values).",
        ),
        argument(
            "--tests",
            metavar="VAR_OR_CELL",
            help="Asserts the result must pass: a variable holding the code as a string, "
            "or an input cell as In[3] / 3 (-1 = the cell above).",
        ),
        *magic_arguments_for(("timeout", "memory", "quiet")),
    ]
    for decorator in reversed(decorators):
        func = decorator(func)
    return func


def _user_errors(func: Callable) -> Callable:
    """Our exceptions become IPython's one-line ``UsageError`` (no traceback of ours)."""
    if inspect.iscoroutinefunction(func):

        @functools.wraps(func)
        async def awaited(*args: Any, **kwargs: Any) -> Any:
            try:
                return await func(*args, **kwargs)
            except SelfHealError as exc:
                raise UsageError(str(exc)) from None

        return awaited

    @functools.wraps(func)
    def plain(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except SelfHealError as exc:
            raise UsageError(str(exc)) from None

    return plain


@magics_class
class SelfHealMagics(Magics):
    """The notebook front of selfheal-jupyter."""

    shell: Any  # IPython types it Optional; a registered Magics always has one

    def __init__(self, shell: Any) -> None:
        super().__init__(shell)
        self.settings = SelfHeal(parent=shell)
        self.last_run: Run | None = None
        self._autoheal: autoheal.Autoheal | None = None
        self.gate = kernel_gate()
        self.teacher = teaching.Teacher(shell, self.gate)

    # ================================================================== %%agent
    @magic_arguments()
    @_common_options
    @magic_arguments_for(("no_plan",))[0]
    @argument(
        "--plan-only",
        nargs="?",
        const=PLAN_NAME,
        metavar="VAR",
        help=f"Only plan: show the steps and store them (a list of strings) in VAR "
        f"(default {PLAN_NAME}); edit it, then run %%%%agent --plan VAR.",
    )
    @argument("--plan", metavar="VAR", help="Use the plan in VAR (list of steps or text) as is.")
    @cell_magic
    @_user_errors
    def agent(self, line: str, cell: str) -> None:
        """Plan, write, run (in a Docker sandbox) and repair code for the task in the cell.

        The cell body is the task, in plain words. ``{name}`` is replaced by the value of
        the notebook variable ``name`` (``{{`` / ``}}`` give literal braces). The record
        of the run is stored in ``agent_result`` (also ``_``); nothing else in your
        namespace changes unless you press Insert or Run in my kernel.

        Examples::

            %%agent --inputs df --tests checks
            Total sales per region in {df_name}, as a bar chart.

            %%agent --plan-only
            Parse the log file lines into a DataFrame.

        Configure defaults with ``%config SelfHeal.max_iterations = 5`` (see ``%config SelfHeal``).
        """
        run_sync(self._agent(line, cell, BLOCKING))

    @_user_errors
    async def agent_async(self, line: str, cell: str) -> None:
        await self._agent(line, cell, AWAITING)

    async def _agent(self, line: str, cell: str, wait: Wait) -> None:
        self.gate.admit("agent", run=False)  # the policy first: a closed entry reads nothing
        settings, task, plan_var = self._agent_job(line, cell)
        self.gate.admit("agent")  # counted once the task was admitted
        if plan_var:
            self._show_plan(await wait(controller.plan_pump(settings, task)), plan_var)
        else:
            self._finished(await controller.CellRun(self.shell, settings, task).execute(wait))

    # ================================================================== %%heal
    @magic_arguments()
    @_common_options
    @argument("hint", nargs="*", help="Optional words on what the code should do.")
    @cell_magic
    @_user_errors
    def heal(self, line: str, cell: str) -> None:
        """Run this cell's code in the sandbox; if it fails, repair it with the agent.

        Your code is iteration 0 and its traceback is the first feedback. What the cell
        reads from the notebook travels with it: imports, functions and classes defined
        in the notebook (their source), and copies of the data (never the live objects).
        Your kernel is not touched: press Replace this cell, Insert below or Run in my
        kernel to take the repaired code.
        """
        run_sync(self._heal(line, cell, BLOCKING))

    @_user_errors
    async def heal_async(self, line: str, cell: str) -> None:
        await self._heal(line, cell, AWAITING)

    async def _heal(self, line: str, cell: str, wait: Wait) -> None:
        self.gate.admit("heal", run=False)
        job = self.heal_job(line, cell)
        self.gate.admit("heal")
        self._finished(await controller.CellRun(self.shell, *job).execute(wait))

    # ================================================================== %%hint
    @magic_arguments()
    @_common_options
    @argument("hint", nargs="*", help="Optional words on what the code should do.")
    @cell_magic
    @_user_errors
    def hint(self, line: str, cell: str) -> None:
        """A hint for this cell's failing code, never the answer (teaching mode).

        The code runs in the sandbox as with %%heal, and the agent looks for a fix that
        passes your asserts and tests, but keeps it. Each run of %%hint on the same code
        (or Another hint in the panel) gives the next hint: 1 where it goes wrong, 2 why
        (with the values at that moment), 3 the fix, if your instructor allows it.
        Nothing in your notebook changes; agent_result.hints holds the hints.
        """
        run_sync(self._hint(line, cell, BLOCKING))

    @_user_errors
    async def hint_async(self, line: str, cell: str) -> None:
        await self._hint(line, cell, AWAITING)

    async def _hint(self, line: str, cell: str, wait: Wait) -> None:
        await self.teacher.turn(*self.hint_job(line, cell), line_offset=1).execute(wait)
        self._hinted()

    def _hinted(self) -> None:
        record = self.shell.user_ns.get(controller.RESULT_NAME)
        if isinstance(record, Run) and record.hints:
            self.last_run = record  # for %agent_export

    # ================================================================== line magics
    @line_magic
    def agent_autoheal(self, line: str) -> None:
        """``%agent_autoheal on|off``: under a failing cell's traceback, offer an
        "Ask the agent to fix this" button (never an automatic change)."""
        word = line.strip().lower()
        if word in ("on", "1", "true", "yes"):
            try:
                hints_only = self.gate.policy.mode == "hints"
                self.gate.admit("hint" if hints_only else "autoheal", run=False)
            except SelfHealError as exc:
                raise UsageError(str(exc)) from None
            if self._autoheal is None:
                self._autoheal = autoheal.Autoheal(
                    self.shell,
                    self.heal_job,
                    self._finished,
                    gate=self.gate,
                    give_hint=self._button_hint,
                    can_hint=self._can_hint,
                )
            label = autoheal.HINT_TEXT if hints_only else autoheal.BUTTON_TEXT
            print(f"selfheal: autoheal on — failing cells get a '{label}' button.")
        elif word in ("off", "0", "false", "no"):
            if self._autoheal is not None:
                self._autoheal.remove()
                self._autoheal = None
            print("selfheal: autoheal off.")
        else:
            state = "on" if self._autoheal else "off"
            raise UsageError(f"%agent_autoheal takes on or off (it is {state}).")

    @magic_arguments()
    @argument("path", help="Where to write: a .ipynb notebook (or JSON with --json).")
    @argument("--json", action="store_true", help="Write the raw run record as JSON.")
    @argument(
        "--hints",
        action="store_true",
        help="Write the hints asked for in this kernel (each cell, then its hints in order).",
    )
    @line_magic
    def agent_export(self, line: str) -> None:
        """Write the last run as a teaching notebook: task, plan, each iteration's
        diff, code and traceback as cells (``--json``: the raw record). The cell shows
        a link that opens the file. ``--hints``: the hints a student asked for, for the
        teacher."""
        from .export import export_hints, export_link_html, export_run

        args = parse_argstring(self.agent_export, line)
        if args.hints:
            if not self.teacher.asked:
                raise UsageError("No hints asked for yet in this kernel: run a %%hint cell first.")
            try:
                path = export_hints(self.teacher.asked, args.path, as_json=args.json)
            except OSError as exc:
                raise UsageError(f"Could not write {args.path}: {exc.strerror or exc}.") from None
            print(f"selfheal: wrote {path}")
            return
        if self.last_run is None:
            raise UsageError("Nothing to export yet: run an %%agent or %%heal cell first.")
        try:
            path = export_run(self.last_run, args.path, as_json=args.json)
        except OSError as exc:
            raise UsageError(f"Could not write {args.path}: {exc.strerror or exc}.") from None
        show_html(export_link_html(path), f"selfheal: wrote {path}")

    # ================================================================== parsing into a job
    def _raw_inputs(self) -> list[str]:
        return list(self.shell.history_manager.input_hist_raw)

    def _agent_job(self, line: str, cell: str) -> tuple[SelfHeal, Task, str | None]:
        args = parse_argstring(self.agent, line)
        task = arguments.agent_task(args, cell, self.shell.user_ns, self._raw_inputs())
        settings = arguments.settings_for(args, self.shell, AGENT_FLAGS)
        check_shape(task, settings.max_code_bytes)  # before anything reads the code or counts a run
        task.context = controller.gather_context(self.shell, settings, task, task_text=cell)
        task.data_checks = controller.derive_checks(self.shell, task)
        return settings, task, args.plan_only

    def heal_job(self, line: str, cell: str) -> tuple[SelfHeal, Task]:
        return self._cell_job(self.heal, line, cell)

    def _cell_job(self, magic: Any, line: str, cell: str) -> tuple[SelfHeal, Task]:
        args = parse_argstring(magic, line)
        task = arguments.heal_task(args, cell, self.shell.user_ns, self._raw_inputs())
        settings = arguments.settings_for(args, self.shell, HEAL_FLAGS, auto_plan=False)
        check_shape(task, settings.max_code_bytes)  # before anything reads the code or counts a run
        task.context = controller.gather_context(self.shell, settings, task)
        return settings, task

    def _button_hint(self, source: str) -> None:
        """The autoheal button in hints mode: a hint for the failing cell."""
        settings, task = self.hint_job("", source)
        self.teacher.turn(settings, task).run_sync()
        self._hinted()

    def _can_hint(self, source: str) -> bool:
        """The failing cell may still get a hint (else no Give me a hint button)."""
        args = parse_argstring(self.hint, "")
        task = arguments.heal_task(args, source, self.shell.user_ns, self._raw_inputs())
        return self.teacher.can_hint(task)

    def hint_job(self, line: str, cell: str) -> tuple[SelfHeal, Task]:
        return self._cell_job(self.hint, line, cell)

    def _finished(self, run: Run) -> None:
        self.last_run = run  # for %agent_export

    def _show_plan(self, plan: Any, name: str) -> None:
        """Store the steps (a list the user edits) in ``name`` and show them."""
        self.shell.user_ns[name] = list(plan.steps)
        hint = (
            f'<div style="color:#6e7781">Stored in <code>{name}</code> (a list of steps). Edit it, '
            f"then run the task with <code>%%agent --plan {name}</code>.</div>"
        )
        text = "\n".join(f"{i}. {s}" for i, s in enumerate(plan.steps, 1))
        show_html(plan_html(plan) + hint, f"Plan (stored in {name}):\n{text}")


def load(ipython: Any) -> None:
    """Register the magics (``%load_ext selfheal_jupyter``)."""
    magics = SelfHealMagics(ipython)
    ipython.register_magics(magics)
    if magics.settings not in ipython.configurables:
        ipython.configurables.append(magics.settings)
    controller.install(ipython)


def unload(ipython: Any) -> None:
    """Undo :func:`load` (``%unload_ext selfheal_jupyter``)."""
    magics = ipython.magics_manager.registry.pop("SelfHealMagics", None)
    for kind in ("cell", "line"):
        table = ipython.magics_manager.magics[kind]
        for name in ("agent", "heal", "hint", "agent_autoheal", "agent_export"):
            table.pop(name, None)
    controller.uninstall(ipython)
    if magics is not None:
        if magics.settings in ipython.configurables:
            ipython.configurables.remove(magics.settings)
        if magics._autoheal is not None:
            magics._autoheal.remove()

"""``%%agent``, ``%%heal``, ``%agent_autoheal`` and ``%agent_export``.

The magic parses the cell (``magic_args.py``), builds the loop through the factory
(the one place that wires endpoint, sandbox and agents), hands the run to
``front.CellRun`` and a renderer, and records the result in ``agent_result``. It
never writes anything else into the user's namespace unless the user presses
**Insert** / **Run in my kernel** (``--plan-only`` stores the plan it was asked for).

In a kernel, an ``%%agent`` / ``%%heal`` cell is turned into an awaited call (an
input transformer adds ``await``): while the cell awaits, ipykernel dispatches widget
messages, so the panel's Stop button works and the cell still blocks until the run
ends (nbclient / nbconvert save complete outputs).
"""

from __future__ import annotations

import threading
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring

from . import magic_args
from .config import SelfHeal
from .errors import SelfHealError
from .cells import FrontCells
from .front import CellRun, call_async, call_sync
from .codeblocks import code_diff
from .render.diff import diff_html
from .render.style import heading
from .model import Run, Task
from .render.html import message_html, plan_html
from .render.inline import PanelRenderer, StaticRenderer, show_html

RESULT_NAME = "agent_result"
PLAN_NAME = "agent_plan"
ASYNC_MAGICS = ("agent", "heal")
HELLO_TIMEOUT_S = 2.0
"""How long a passing cell waits for the labextension's answer if it is still out."""


def _common_options(func: Any) -> Any:
    """Options shared by %%agent and %%heal (applied bottom-up, shown top-down)."""
    for decorator in reversed(
        [
            argument("--max-iterations", type=int, metavar="N",
                     help="Most developer → QA rounds (default: SelfHeal.max_iterations)."),
            argument("--model", metavar="NAME", help="Model name at the endpoint (default: SelfHeal.model)."),
            argument("--inputs", metavar="A,B",
                     help="Notebook variables copied into the sandbox (the model sees names, "
                          "types, shapes and columns, never the values)."),
            argument("--tests", metavar="VAR_OR_CELL",
                     help="Asserts the result must pass: a variable holding the code as a string, "
                          "or an input cell as In[3] / 3 (-1 = the cell above)."),
            argument("--timeout", type=float, metavar="SECONDS",
                     help="Wall-clock limit of one sandbox run (default: SelfHeal.timeout_s)."),
            argument("--memory", metavar="SIZE", help="Memory limit of the sandbox, e.g. 512m, 1g."),
            argument("--quiet", action="store_true", help="Show only the final summary."),
        ]
    ):
        func = decorator(func)
    return func


@magics_class
class SelfHealMagics(Magics):
    """The notebook front of selfheal-jupyter."""

    def __init__(self, shell: Any) -> None:
        super().__init__(shell)
        self.settings = SelfHeal(parent=shell)
        self.last_run: Run | None = None
        self._plan_cancel = threading.Event()
        self._autoheal = False

    # ================================================================== %%agent
    @magic_arguments()
    @_common_options
    @argument("--no-plan", action="store_true", help="Skip the planner; write code straight away.")
    @argument("--plan-only", nargs="?", const=PLAN_NAME, metavar="VAR",
              help=f"Only plan: show the steps and store them (a list of strings) in VAR "
                   f"(default {PLAN_NAME}); edit it, then run %%%%agent --plan VAR.")
    @argument("--plan", metavar="VAR", help="Use the plan in VAR (list of steps or text) as is.")
    @cell_magic
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
        settings, task, plan_var = self._agent_job(line, cell)
        if plan_var:
            self._plan_only(settings, task, plan_var, call_sync)
        else:
            self._run_sync(settings, task)
        return None

    async def agent_async(self, line: str, cell: str) -> None:
        settings, task, plan_var = self._agent_job(line, cell)
        if plan_var:
            plan = await call_async(self._planner(settings, task), self._plan_cancel)
            self._show_plan(plan, plan_var)
        else:
            await self._run_async(settings, task)
        return None

    # ================================================================== %%heal
    @magic_arguments()
    @_common_options
    @argument("hint", nargs="*", help="Optional words on what the code should do.")
    @cell_magic
    def heal(self, line: str, cell: str) -> None:
        """Run this cell's code in the sandbox; if it fails, repair it with the agent.

        Your code is iteration 0 and its traceback is the first feedback. What the cell
        reads from the notebook travels with it: imports, functions and classes defined
        in the notebook (their source), and copies of the data (never the live objects).
        Your kernel is not touched: press Insert or Run in my kernel to take the
        repaired code.
        """
        settings, task = self._heal_job(line, cell)
        self._run_sync(settings, task)
        return None

    async def heal_async(self, line: str, cell: str) -> None:
        settings, task = self._heal_job(line, cell)
        await self._run_async(settings, task)
        return None

    # ================================================================== line magics
    @line_magic
    def agent_autoheal(self, line: str) -> None:
        """``%agent_autoheal on|off``: under a failing cell's traceback, offer an
        "Ask the agent to fix this" button (never an automatic change)."""
        from .autoheal import disable, enable

        word = line.strip().lower()
        if word in ("on", "1", "true", "yes"):
            enable(self)
            self._autoheal = True
            print("selfheal: autoheal on — failing cells get an 'Ask the agent to fix this' button.")
        elif word in ("off", "0", "false", "no"):
            disable(self)
            self._autoheal = False
            print("selfheal: autoheal off.")
        else:
            state = "on" if self._autoheal else "off"
            raise UsageError(f"%agent_autoheal takes on or off (it is {state}).")

    @magic_arguments()
    @argument("path", help="Where to write: a .ipynb notebook (or JSON with --json).")
    @argument("--json", action="store_true", help="Write the raw run record as JSON.")
    @line_magic
    def agent_export(self, line: str) -> None:
        """Write the last run as a teaching notebook: task, plan, each iteration's
        diff, code and traceback as cells (``--json``: the raw record)."""
        from .export import export_run

        args = parse_argstring(self.agent_export, line)
        if self.last_run is None:
            raise UsageError("Nothing to export yet: run an %%agent or %%heal cell first.")
        try:
            path = export_run(self.last_run, args.path, as_json=args.json)
        except OSError as exc:
            raise UsageError(f"Could not write {args.path}: {exc.strerror or exc}.") from None
        print(f"selfheal: wrote {path}")

    # ================================================================== building a run
    def _settings(self, args: Any, **extra: Any) -> SelfHeal:
        overrides: dict[str, Any] = dict(extra)
        if args.max_iterations is not None:
            if args.max_iterations < 1:
                raise UsageError("--max-iterations must be at least 1.")
            overrides["max_iterations"] = args.max_iterations
        if args.model:
            overrides["model"] = args.model
        if args.timeout is not None:
            if args.timeout <= 0:
                raise UsageError("--timeout must be a positive number of seconds.")
            overrides["timeout_s"] = args.timeout
        if args.memory:
            overrides["memory"] = args.memory
        if args.quiet:
            overrides["quiet"] = True
        return SelfHeal(parent=self.shell, **overrides)

    def _raw_inputs(self) -> list[str]:
        return list(self.shell.history_manager.input_hist_raw)

    def _agent_job(self, line: str, cell: str) -> tuple[SelfHeal, Task, str | None]:
        args = parse_argstring(self.agent, line)
        ns = self.shell.user_ns
        try:
            prompt = magic_args.clean_task(magic_args.interpolate(cell, ns))
            if args.plan and args.plan_only:
                raise UsageError("--plan and --plan-only do not go together: plan first, then use it.")
            extra = {"auto_plan": False} if args.no_plan else {}
            settings = self._settings(args, **extra)
            task = Task(
                prompt=prompt,
                inputs=magic_args.resolve_inputs(args.inputs, ns),
                tests=magic_args.resolve_tests(args.tests, ns, self._raw_inputs()),
                plan=magic_args.resolve_plan(args.plan, ns),
            )
            task.context = self._context(settings, task, task_text=cell)
        except SelfHealError as exc:
            raise UsageError(str(exc)) from None
        if args.plan_only and not args.plan_only.isidentifier():
            raise UsageError(f"--plan-only {args.plan_only!r}: give a variable name to store the plan in.")
        return settings, task, args.plan_only

    def _heal_job(self, line: str, cell: str) -> tuple[SelfHeal, Task]:
        args = parse_argstring(self.heal, line)
        ns = self.shell.user_ns
        if not cell.strip():
            raise UsageError("%%heal needs code in the cell body: the code to run and repair.")
        hint = magic_args.interpolate(" ".join(args.hint), ns).strip()
        try:
            settings = self._settings(args, auto_plan=False)
            tests = magic_args.resolve_tests(args.tests, ns, self._raw_inputs())
            goals = ["run without errors"]
            if tests:
                goals.append("pass the given tests")
            if hint:
                goals.append(hint)
            task = Task(
                prompt="Make this code " + ", ".join(goals[:-1]) + (" and " if len(goals) > 1 else "")
                + goals[-1] + ".",
                inputs=magic_args.resolve_inputs(args.inputs, ns),
                tests=tests,
                initial_code=cell,
            )
            task.context = self._context(settings, task)
        except SelfHealError as exc:
            raise UsageError(str(exc)) from None
        return settings, task

    def _context(self, settings: SelfHeal, task: Task, *, task_text: str | None = None) -> Any:
        """What the cell (``%%heal``) or the task's words (``%%agent``) need from the
        notebook, resolved now: import lines, notebook sources, copies (never the live
        objects; the namespace is only read)."""
        from . import context
        from .factory import sandbox_packages

        ns = self.shell.user_ns
        options = {
            "max_bytes": settings.context_max_bytes,
            "hidden": getattr(self.shell, "user_ns_hidden", None),
            "image_packages": sandbox_packages(settings),
            "skip": set(task.inputs),
        }
        if task_text is not None:
            return context.for_task(task_text, ns, **options)
        return context.for_cell(task.initial_code or "", ns,
                                transform=self.shell.transform_cell, **options)

    def _loop(self, settings: SelfHeal) -> Any:
        from .factory import build_loop

        try:
            return build_loop(settings)
        except SelfHealError as exc:
            raise UsageError(str(exc)) from None

    def _planner(self, settings: SelfHeal, task: Task) -> Any:
        """A call that plans ``task`` (Ctrl-C / interrupt → ``self._plan_cancel``)."""
        loop = self._loop(settings)
        self._plan_cancel = threading.Event()
        cancel = self._plan_cancel

        def plan() -> Any:
            try:
                return loop.plan(task, cancel=cancel)
            except SelfHealError as exc:
                raise UsageError(str(exc)) from None

        return plan

    def _plan_only(self, settings: SelfHeal, task: Task, name: str, call: Any) -> None:
        plan_call = self._planner(settings, task)
        self._show_plan(call(plan_call, self._plan_cancel), name)

    def _show_plan(self, plan: Any, name: str) -> None:
        """Store the steps (a list the user edits) in ``name`` and show them."""
        self.shell.user_ns[name] = list(plan.steps)
        hint = (
            f'<div style="color:#6e7781">Stored in <code>{name}</code> (a list of steps). Edit it, '
            f"then run the task with <code>%%agent --plan {name}</code>.</div>"
        )
        text = "\n".join(f"{i}. {s}" for i, s in enumerate(plan.steps, 1))
        show_html(plan_html(plan) + hint, f"Plan (stored in {name}):\n{text}")

    # ================================================================== running
    def _cell_run(self, settings: SelfHeal, task: Task, cells: FrontCells | None = None) -> CellRun:
        cell_run = CellRun(self._loop(settings), task, renderer=None)
        cell_run.cells = cells if cells is not None else FrontCells(self.shell)
        if settings.widget and getattr(self.shell, "kernel", None) is not None:
            cell_run.renderer = PanelRenderer(
                max_iterations=settings.max_iterations,
                on_stop=cell_run.stop,
                on_action=lambda name: self._on_action(name, cell_run),
                quiet=settings.quiet,
            )
        else:
            cell_run.renderer = StaticRenderer(quiet=settings.quiet)
        return cell_run

    def _run_sync(self, settings: SelfHeal, task: Task, cells: FrontCells | None = None) -> Run:
        cell_run = self._cell_run(settings, task, cells)
        run = self._guard(cell_run.run_sync)
        self._record(run, cell_run)
        self._hand_over(run, cell_run, in_cell=cells is None)
        return run

    async def _run_async(self, settings: SelfHeal, task: Task) -> Run:
        cell_run = self._cell_run(settings, task)
        try:
            run = await cell_run.run_async()
        except SelfHealError as exc:
            raise UsageError(str(exc)) from None
        self._record(run, cell_run)
        if run.final_code is not None:
            await cell_run.cells.answered(HELLO_TIMEOUT_S)
        self._hand_over(run, cell_run, in_cell=True)
        return run

    def _hand_over(self, run: Run, cell_run: CellRun, *, in_cell: bool) -> None:
        """The run has ended, so does the cell: offer the passing code. With the
        labextension the panel's buttons edit the notebook later, on a click; without
        it the code goes out with this cell's reply (``set_next_input``)."""
        code = run.final_code
        panel = getattr(cell_run.renderer, "panel", None)
        if code is None:
            return
        heal = run.task.initial_code is not None
        if cell_run.cells.ready and panel is not None:
            review = ""
            if heal:
                review = heading("Diff to your cell") + diff_html(
                    code_diff(run.task.initial_code, code, old_name="your cell", new_name="fix"))
            panel.offer_actions(
                "Passed. Replace this cell with the fix, insert it below, or run it in your kernel." if heal
                else "Passed. Insert the code below, or run it in your kernel.",
                insert=True, replace=heal, review=review,
            )
            return
        if in_cell:
            self.shell.set_next_input(code, replace=False)
            note = ("The passing code was handed to the front end as the next cell (set_next_input): "
                    "this front end cannot insert or replace cells on a click.")
        else:
            note = "This front end cannot edit cells on a click: the code is in agent_result.final_code."
        show_html(message_html(note), f"selfheal: {note}")
        if panel is not None:
            panel.offer_actions("Passed.", insert=False, replace=False)

    @staticmethod
    def _guard(func: Any) -> Run:
        try:
            return func()
        except SelfHealError as exc:
            raise UsageError(str(exc)) from None

    def _record(self, run: Run, cell_run: CellRun) -> None:
        """Store the run where the user can reach it: ``agent_result`` and ``_``."""
        self.last_run = run
        self.shell.user_ns[RESULT_NAME] = run
        hook = self.shell.displayhook
        if getattr(hook, "do_full_cache", False):
            hook.___, hook.__, hook._ = hook.__, hook._, run
            self.shell.push({"_": hook._, "__": hook.__, "___": hook.___}, interactive=False)

    # ================================================================== buttons
    def _on_action(self, name: str, cell_run: CellRun) -> None:
        """A button of ``cell_run``'s panel was pressed (after the cell ended)."""
        panel = getattr(cell_run.renderer, "panel", None)
        run = cell_run.run
        if run is None or panel is None:
            return
        code = run.final_code
        if code is None:
            panel.settle("No passing code to use.")
            return
        if name in ("insert", "replace"):
            done_text = ("Inserted below the cell." if name == "insert"
                         else "Replaced the cell's code with the fix (it was not run).")

            def done(ok: bool, reason: str) -> None:
                panel.settle(done_text if ok else f"The front end could not do it: {reason}.")

            if not cell_run.cells.send(name, code, done):
                self.shell.set_next_input(code, replace=False)
                panel.settle("The code will appear below the next cell you run.")
        elif name == "run":
            with panel.output:
                self.shell.run_cell(code, store_history=False)
            panel.settle("Ran the code in your kernel.")
        else:
            panel.settle("Done: the record stays in agent_result.")


# ====================================================================== async entry
def _await_transformer(lines: list[str]) -> list[str]:
    """``get_ipython().run_cell_magic('agent', ...)`` → an awaited call (kernel only)."""
    if not lines:
        return lines
    first = lines[0]
    for name in ASYNC_MAGICS:
        prefix = f"get_ipython().run_cell_magic('{name}', "
        if first.startswith(prefix):
            call = f"await __import__('selfheal_jupyter.magics').magics.run_cell_async('{name}', "
            return [call + first[len(prefix):], *lines[1:]]
    return lines


class _AwaitWhenPossible:
    """The transformer as registered: only while the shell can await (``%autoawait``)."""

    def __init__(self, shell: Any) -> None:
        self.shell = shell

    def __call__(self, lines: list[str]) -> list[str]:
        return _await_transformer(lines) if _kernel_can_await(self.shell) else lines


async def run_cell_async(name: str, line: str, cell: str) -> None:
    """The awaited form of ``%%agent`` / ``%%heal`` (see the module docstring)."""
    from IPython import get_ipython

    shell = get_ipython()
    magics = shell.magics_manager.registry["SelfHealMagics"]
    method = magics.agent_async if name == "agent" else magics.heal_async
    await method(line, cell)


def _kernel_can_await(shell: Any) -> bool:
    """Only a kernel with an asyncio loop dispatches comms while a cell awaits."""
    try:
        from IPython.core.async_helpers import _asyncio_runner
    except ImportError:  # pragma: no cover
        return False
    return (
        getattr(shell, "kernel", None) is not None
        and bool(getattr(shell, "autoawait", False))
        and getattr(shell, "loop_runner", None) is _asyncio_runner
    )


def load(ipython: Any) -> None:
    """Register the magics (``%load_ext selfheal_jupyter``)."""
    magics = SelfHealMagics(ipython)
    ipython.register_magics(magics)
    if magics.settings not in ipython.configurables:
        ipython.configurables.append(magics.settings)
    if getattr(ipython, "kernel", None) is not None and not any(
        isinstance(t, _AwaitWhenPossible) for t in ipython.input_transformers_post
    ):
        ipython.input_transformers_post.append(_AwaitWhenPossible(ipython))


def unload(ipython: Any) -> None:
    """Undo :func:`load` (``%unload_ext selfheal_jupyter``)."""
    magics = ipython.magics_manager.registry.pop("SelfHealMagics", None)
    for kind in ("cell", "line"):
        table = ipython.magics_manager.magics[kind]
        for name in ("agent", "heal", "agent_autoheal", "agent_export"):
            table.pop(name, None)
    ipython.input_transformers_post[:] = [
        t for t in ipython.input_transformers_post if not isinstance(t, _AwaitWhenPossible)
    ]
    if magics is not None:
        if magics.settings in ipython.configurables:
            ipython.configurables.remove(magics.settings)
        if magics._autoheal:
            from .autoheal import disable

            disable(magics)

"""The one controller of a cell run: ``%%agent``, ``%%heal`` and the autoheal button
all go through it (``selfheal run`` waits for the same runner with the same pump).

* :class:`CellRun` is one run for a notebook cell: where it happens (the
  :class:`~selfheal_jupyter.runner.base.Runner` for the settings: here or the class
  service), the renderer (the live panel when a front end is attached, else static
  HTML), Stop, the ``agent_result`` record, and the hand-over of passing code — its
  smallest form that passes again (``loop/fix_handover.py``) — through the decision
  (Accept (Replace this cell) / Insert below / Run in my kernel / Reject, only on a
  click; see ``cells.py``), or of the best attempt of a run that did not pass (Insert
  best attempt below, only). The cell ends when the run ends. It is written once,
  :meth:`CellRun.execute`, waiting for the :class:`~selfheal_jupyter.runner.pump.Pump`
  through a :class:`~selfheal_jupyter.runner.pump.Wait` (awaiting in a kernel);
  :meth:`CellRun.run_sync` is its one-line blocking adapter.
* In a kernel, comm messages (Stop) are only dispatched while a cell *awaits*. The
  cell is not rewritten for that: :func:`install` adds an AST transformer that turns
  IPython's own ``get_ipython().run_cell_magic('agent', line, cell)`` into an awaited
  call of :func:`run_cell_magic_async` (``In[n]`` keeps IPython's text), and tells the
  kernel such a cell runs asynchronously. The magic line is expanded as
  ``run_cell_magic`` expands it (``$var`` / ``{var}``).
  (jupyter-ui-poll, which would process comm messages inside a blocking cell, was
  tried: under ipykernel 7.4 it delivers nothing — the kernel has no
  ``do_one_iteration`` any more and the library swallows the error.)

This module never imports the magics: the controller is handed the shell, the
settings and the task.
"""

from __future__ import annotations

import ast
import threading
from collections.abc import Callable
from typing import Any, ClassVar

from ..codeblocks import code_diff
from ..config import SelfHeal
from ..errors import SelfHealError
from ..loop import events as ev
from ..loop.events import Handlers, RunFinished, RunStarted, Waiting, dispatch, ignore
from ..loop.fix_handover import without_notes
from ..model import DataCheck, NotebookContext, Plan, Run, Task
from ..render.html import (
    TRIED_WORDS,
    blind_sentence,
    capabilities_sentence,
    fix_output_html,
    flags_html,
    message_html,
    review_html,
    tried_lines,
)
from ..render.inline import PanelRenderer, Renderer, StaticRenderer, show_html
from ..runner import BLOCKING, Pump, Wait, note_kept, run_sync, runner_for
from ..spec import notebook_data
from .cells import FrontCells

HELLO_TIMEOUT_S = 1.0
"""How long after the run's start a passing cell may wait for the labextension's answer."""

RESULT_NAME = "agent_result"
CELL_MAGICS = ("agent", "heal", "hint")


# ====================================================================== a cell's run
KERNEL_NOTE = (
    "Your kernel may show Idle meanwhile: this cell waits for the run without "
    "blocking the kernel, so your other cells can still run."
)
"""Why JupyterLab's status bar can say Idle while the cell shows [*] (an awaiting cell)."""


class CellRun:
    """One run of ``task`` for a notebook cell (see the module docstring)."""

    def __init__(
        self, shell: Any, settings: SelfHeal, task: Task, *, cells: FrontCells | None = None, entry: str = ""
    ) -> None:
        self.shell = shell
        self.settings = settings
        self.task = task
        self.entry = entry or ("heal" if task.initial_code is not None else "agent")
        self.runner = runner_for(settings)
        self.runner.start()
        self.in_cell = cells is None
        """False for the autoheal button: its cell has already ended."""
        self.cells = cells if cells is not None else FrontCells(shell)
        self.run: Run | None = None
        self._started = False
        self.pump: Pump[Run] = Pump(self._work, self._on_event, on_tick=self._tick)
        self.renderer: Renderer
        if settings.widget and getattr(shell, "kernel", None) is not None:
            self.renderer = PanelRenderer(
                max_iterations=settings.max_iterations,
                on_stop=self.stop,
                on_action=self.on_action,
                quiet=settings.quiet,
            )
        else:
            self.renderer = StaticRenderer(quiet=settings.quiet)

    @property
    def panel(self) -> Any:
        return getattr(self.renderer, "panel", None)

    def stop(self) -> None:
        """Ask the loop to stop (the Stop button)."""
        self.pump.cancel.set()

    # ------------------------------------------------------------------ running
    def _work(self, emit: Callable[[Any], None], cancel: threading.Event) -> Run:
        return self.runner.full(self.task, self.entry, emit, cancel)

    def _on_event(self, event: Any) -> None:
        dispatch(self.HANDLERS, self, event)

    def _run_started(self, event: RunStarted) -> None:
        if self._started:  # it waited in the class service's queue: now it starts
            self.renderer.handle(event)
            return
        self._started = True
        self.renderer.start(event.run)

    def _waiting(self, event: Waiting) -> None:
        """The class service's queue: the run waits its turn."""
        if not self._started:
            self._started = True
            self.renderer.start(Run(task=self.task))
        self.renderer.handle(event)

    def _render(self, event: Any) -> None:
        self.renderer.handle(event)

    HANDLERS: ClassVar[Handlers] = {
        RunStarted: _run_started,
        Waiting: _waiting,
        RunFinished: ignore,  # the end is rendered from the record
        ev.PlanReady: _render,
        ev.TokensStreamed: _render,
        ev.CandidateReady: _render,
        ev.ExecutionStarted: _render,
        ev.ExecutionDone: _render,
        ev.FailureExplained: _render,
        ev.ModelWaiting: _render,
        ev.VerdictReady: _render,
        ev.CheckingFix: _render,
    }
    """The one mapping from each event to what the cell run does with it."""

    def _tick(self) -> None:
        if self.panel is not None:
            self.panel.tick()

    def _finish(self, run: Run) -> Run:
        note_kept(run, RESULT_NAME)
        self.run = run
        if not self._started:
            self.renderer.start(run)
        self.renderer.finish(run)
        self.record(run)
        return run

    async def execute(self, wait: Wait) -> Run:
        """The run to its record, rendered and handed over; ``wait``: blocking, or
        awaiting in a kernel cell (then the labextension may answer meanwhile)."""
        if wait.awaits and isinstance(self.renderer, PanelRenderer):
            self.renderer.kernel_note = KERNEL_NOTE
        run = self._finish(await wait(self.pump))
        if wait.awaits and handed_code(run) is not None:
            await self.cells.answered(HELLO_TIMEOUT_S)
        self.hand_over(run)
        return run

    def run_sync(self) -> Run:
        return run_sync(self.execute(BLOCKING))

    def record(self, run: Run) -> None:
        """Store the run where the user can reach it: ``agent_result`` and ``_``."""
        self.shell.user_ns[RESULT_NAME] = run
        hook = self.shell.displayhook
        if getattr(hook, "do_full_cache", False):
            hook.___, hook.__, hook._ = hook.__, hook._, run
            self.shell.push({"_": hook._, "__": hook.__, "___": hook.___}, interactive=False)

    # ------------------------------------------------------------------ accept
    def hand_over(self, run: Run) -> None:
        """Offer the passing code (its :class:`~selfheal_jupyter.model.Fix`). With the
        labextension the decision's buttons edit the notebook later, on a click, and the
        view is brought to the decision; without it the code goes out with this cell's
        reply (``set_next_input``) and the cell says so."""
        code = handed_code(run)
        if run.final_code is None or code is None:
            self.offer_best_attempt(run)
            return
        heal = run.task.initial_code is not None
        review = fix_review(run)
        panel = self.panel
        if self.cells.ready and panel is not None:
            if heal and code.strip() == (run.task.initial_code or "").strip():
                panel.offer_actions(
                    "Your cell passed as it is: there is nothing to change.",
                    insert=False,
                    replace=False,
                    run=False,
                    review=review,
                )
            else:
                blind = blind_sentence(run)
                checked = (
                    ""
                    if run.verified
                    else f"Not verified: {blind}. Review the change before you accept it. "
                    if blind
                    else "Nothing checked its output: review the change before you accept it. "
                )
                plain = not flagged(run)
                panel.offer_actions(
                    checked
                    + (
                        "Accept puts the fix into this cell (it is not run)"
                        + ("; Accept and run runs the cell too." if plain else ".")
                        if heal
                        else "Insert below puts the code in a new cell (it is not run)."
                    ),
                    insert=True,
                    replace=heal,
                    replace_run=plain,
                    review=review,
                )
            self.cells.reveal()
            return
        if self.in_cell:
            self.shell.set_next_input(code, replace=False)
            note = (
                "The passing code was handed to the front end as the next cell (set_next_input): "
                "this front end cannot insert or replace cells on a click."
            )
        else:
            note = "This front end cannot edit cells on a click: the code is in agent_result.fix.code."
        show_html(review + message_html(note, kind="note"), f"selfheal: {note}")
        if panel is not None:
            panel.offer_actions("Passed.", insert=False, replace=False)

    def offer_best_attempt(self, run: Run) -> None:
        """No candidate passed: the attempt that came closest is offered for review,
        to insert below only (it failed, so it never replaces the cell or runs in the
        user's kernel). Without the labextension it stays in ``agent_result``."""
        best = run.best_attempt
        if best is None:
            return
        why = "; ".join(best.verdict.why) or "it did not pass"
        panel = self.panel
        if self.cells.ready and panel is not None:
            review = diff_review(
                run.task.initial_code,
                handed_code(run) or "",
                new_name=f"attempt {best.index}",
                title=f"Best attempt: attempt {best.index} (did not pass)",
                context=run.task.context,
            )
            panel.offer_actions(
                f"No candidate passed. Attempt {best.index} came closest ({why}); "
                "insert it below to work on it, or keep your cell as it is.",
                insert=True,
                replace=False,
                run=False,
                insert_label="Insert best attempt below",
                review=review,
            )
            self.cells.reveal()
            return
        note = (
            f"No candidate passed. The one that came closest, attempt {best.index}, "
            "is in agent_result.best_attempt.candidate.code."
        )
        show_html(message_html(note, kind="note"), f"selfheal: {note}")

    def on_action(self, name: str) -> None:
        """A button of the decision was pressed (after the cell ended)."""
        panel, run = self.panel, self.run
        if run is None or panel is None:
            return
        if name == "reject":
            panel.settle(
                "Rejected: your cell and your kernel are as they were (the run's record stays in agent_result)."
            )
            return
        code = handed_code(run)
        if code is None or (run.final_code is None and name in ("replace", "replace-run", "run", "run-confirmed")):
            panel.settle("No passing code to use.")
            return
        if name in ("insert", "replace", "replace-run"):
            done_text = {
                "insert": "Inserted below the cell.",
                "replace": "Replaced the cell's code with the fix (it was not run).",
                "replace-run": "Replaced the cell's code with the fix and ran the cell.",
            }[name]

            def done(ok: bool, reason: str) -> None:
                panel.settle(done_text if ok else f"The front end could not do it: {reason}.")

            # The cell's error output is the replaced code's: it goes with it.
            options = {} if name == "insert" else {"clear_errors": True, "run": name == "replace-run"}
            if not self.cells.send("insert" if name == "insert" else "replace", cell_text(code), done, **options):
                self.shell.set_next_input(code, replace=False)
                panel.settle("The code will appear below the next cell you run.")
        elif name == "run" and flagged(run):
            panel.confirm(run_question(run))
        elif name == "run-cancelled":
            panel.unconfirm()
        elif name in ("run", "run-confirmed"):
            with panel.output:
                self.shell.run_cell(code, store_history=False)
            panel.settle("Ran the code in your kernel.")


def cell_text(code: str) -> str:
    """Code as a cell holds it: IPython ends every cell it runs with a newline, which
    the user did not type (a cell whose text ends with one shows an empty last line)."""
    return code[:-1] if code.endswith("\n") and not code.endswith("\n\n") else code


def diff_review(
    initial: str | None, code: str, *, title: str, new_name: str, context: NotebookContext | None = None
) -> str:
    """The review shown above the buttons: ``title`` and the diff from the user's cell
    (``initial``; the code itself when the task did not start from a cell) to ``code``,
    with what it does to the notebook's data."""
    changes = notebook_data.changes(context, initial or "", code)
    if initial is None:
        return review_html(title, code=code, data_changes=changes)
    return review_html(
        title, diff=code_diff(initial, code, old_name="your cell", new_name=new_name), data_changes=changes
    )


def fix_review(run: Run) -> str:
    """The review of a passing run's fix: the changes it needs in earlier cells'
    definitions, its diff to the cell (or its code), what was left out and why, what
    the code handed over prints and shows, and right above the buttons what it newly
    can do and what it was seen trying in the sandbox."""
    fix = run.fix
    code = handed_code(run) or ""
    initial = run.task.initial_code
    definitions = [
        (d.name, code_diff(d.notebook, d.fix, old_name=f"{d.name} in your notebook", new_name=f"{d.name} in the fix"))
        for d in (fix.definitions if fix else [])
    ]
    shown = {
        "definitions": definitions,
        "left_out": fix.dropped if fix else [],
        "note": fix.note if fix else "",
        "output": fix_output_html(run),
        "flags": flags_html(run),
        "data_changes": notebook_data.changes(run.task.context, initial or "", code),
    }
    if initial is None:
        return review_html("The code", code=code, **shown)  # type: ignore[arg-type]
    return review_html(
        "Diff to your cell",
        diff=code_diff(initial, code, old_name="your cell", new_name="fix"),
        **shown,  # type: ignore[arg-type]
    )


def flagged(run: Run) -> bool:
    """The review flags what the fix can do, or what it was seen trying."""
    return run.fix is not None and bool(run.fix.capabilities or tried_lines(run))


def run_question(run: Run) -> str:
    """What Run in my kernel asks once more, naming what the review flags."""
    fix = run.fix
    parts = []
    said = capabilities_sentence(fix.capabilities) if fix is not None else ""
    if said:
        parts.append(said + ".")
    tried = fix.tried if fix is not None else []
    if tried:
        seen = [TRIED_WORDS.get(a.kind, a.kind) for a in tried]
        who = "the passing program" if all(a.by == "passing" for a in tried) else "it"
        listed = ", ".join(seen[:-1]) + " and " + seen[-1] if len(seen) > 1 else seen[0]
        parts.append(f"In the sandbox {who} {listed}.")
    return " ".join(["Run it in your kernel, where it has your network, your files and your secrets?", *parts])


def handed_code(run: Run) -> str | None:
    """The code a cell run hands over: the passing program's fix (the smallest change
    that passed), else the passing program, else the best attempt."""
    if run.final_code is not None:
        return run.fix.code if run.fix is not None else run.final_code
    best = run.best_attempt
    return without_notes(best.candidate.code) if best is not None else None


def plan_pump(settings: SelfHeal, task: Task) -> Pump[Plan]:
    """A pump that only plans ``task`` (``--plan-only``), where the settings say runs happen."""
    runner = runner_for(settings)
    runner.start()
    return Pump(lambda emit, cancel: runner.plan(task, emit, cancel))


def gather_context(shell: Any, settings: SelfHeal, task: Task, *, task_text: str | None = None) -> Any:
    """What the cell (``%%heal``) or the task's words (``%%agent``) need from the
    notebook, resolved now: import lines, notebook sources, copies (never the live
    objects; the namespace is only read)."""
    from . import context

    ns = shell.user_ns
    options: dict[str, Any] = {
        "max_bytes": settings.context_max_bytes,
        "hidden": getattr(shell, "user_ns_hidden", None),
        "image_packages": image_packages(settings),
        "skip": set(task.inputs),
    }
    if task_text is not None:
        return context.for_task(task_text, ns, **options)
    return context.for_cell(task.initial_code or "", ns, transform=shell.transform_cell, **options)


def image_packages(settings: SelfHeal) -> dict[str, str] | None:
    """The packages of the sandbox image where the run will happen (None when that
    cannot be told: the run then reports the engine, image or service problem itself)."""
    try:
        return runner_for(settings).packages()
    except SelfHealError:
        return None


def derive_checks(shell: Any, task: Task) -> list[DataCheck]:
    """The checks a question about the notebook's data implies on that data
    (:mod:`~selfheal_jupyter.agents.data_checks`), computed now on the live values it
    names (only read)."""
    from ..agents.data_checks import derive

    if task.context is None or task.initial_code is not None:
        return []
    ns = shell.user_ns
    return derive(task.prompt, {name: ns[name] for name in task.context.data_names() if name in ns})


# ====================================================================== awaiting in a kernel
def kernel_can_await(shell: Any) -> bool:
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


def _our_magic_call(node: ast.AST) -> bool:
    """``get_ipython().run_cell_magic('agent' | 'heal' | 'hint', line, cell)`` as IPython writes it."""
    if not (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "run_cell_magic"
        and isinstance(node.func.value, ast.Call)
        and isinstance(node.func.value.func, ast.Name)
        and node.func.value.func.id == "get_ipython"
    ):
        return False
    first = node.args[0] if node.args else None
    return isinstance(first, ast.Constant) and first.value in CELL_MAGICS and len(node.args) == 3


def _is_our_cell(source: str) -> bool:
    try:
        body = ast.parse(source).body
    except SyntaxError:
        return False
    return len(body) == 1 and isinstance(body[0], ast.Expr) and _our_magic_call(body[0].value)


class AwaitCellMagics(ast.NodeTransformer):
    """The AST transformer: our cell magic's call becomes an awaited call (kernel only)."""

    def __init__(self, shell: Any) -> None:
        self.shell = shell

    def visit_Expr(self, node: ast.Expr) -> ast.AST:
        if not (_our_magic_call(node.value) and kernel_can_await(self.shell)):
            return node
        call = node.value
        assert isinstance(call, ast.Call)
        # The user's namespace may hold anything: the call names this module absolutely.
        target = ast.parse(f"__import__({__name__!r}, fromlist=['_']).run_cell_magic_async", mode="eval").body
        awaited = ast.Await(value=ast.Call(func=target, args=call.args, keywords=[]))
        return ast.copy_location(ast.Expr(value=awaited), node)


class _ShouldRunAsync:
    """``shell.should_run_async``, plus: our cell magics run asynchronously."""

    def __init__(self, shell: Any, original: Callable[..., bool]) -> None:
        self.shell = shell
        self.original = original

    def __call__(
        self, raw_cell: str, *, transformed_cell: str | None = None, preprocessing_exc_tuple: Any = None
    ) -> bool:
        if self.original(raw_cell, transformed_cell=transformed_cell, preprocessing_exc_tuple=preprocessing_exc_tuple):
            return True
        if preprocessing_exc_tuple is not None or transformed_cell is None:
            return False
        return kernel_can_await(self.shell) and _is_our_cell(transformed_cell)


def install(shell: Any) -> None:
    """Let ``%%agent`` / ``%%heal`` cells await in a kernel (see the module docstring)."""
    if getattr(shell, "kernel", None) is None:
        return
    if not any(isinstance(t, AwaitCellMagics) for t in shell.ast_transformers):
        shell.ast_transformers.append(AwaitCellMagics(shell))
    if not isinstance(shell.should_run_async, _ShouldRunAsync):
        shell.should_run_async = _ShouldRunAsync(shell, shell.should_run_async)


def uninstall(shell: Any) -> None:
    shell.ast_transformers[:] = [t for t in shell.ast_transformers if not isinstance(t, AwaitCellMagics)]
    if isinstance(shell.__dict__.get("should_run_async"), _ShouldRunAsync):
        del shell.should_run_async


async def run_cell_magic_async(name: str, line: str, cell: str) -> Any:
    """What an awaited ``%%agent`` / ``%%heal`` cell calls: the line expanded as
    IPython's ``run_cell_magic`` expands it, then the magic's coroutine."""
    from IPython import get_ipython

    shell = get_ipython()
    magic = shell.find_cell_magic(name)
    if magic is None:  # the extension was unloaded meanwhile
        return shell.run_cell_magic(name, line, cell)
    line = shell.var_expand(line, 1)  # 1: the frame of the cell that awaits us
    owner = getattr(magic, "__self__", None)
    with shell.builtin_trap:
        return await getattr(owner, f"{name}_async")(line, cell)

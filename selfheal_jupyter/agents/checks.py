"""The test designer: a few checks written from the task alone, before any code exists.

Why (AgentCoder's test designer): the only checks the loop otherwise has are the user's
own, and a wrong-but-quiet program passes them. Checks written independently of any
candidate catch some of those. They are written from what the task SAYS, never from a
program's behaviour: for a repair, from the task text and the program's comments,
docstrings and signatures — not its bodies, whose bugs the checks would copy.

They are soft: a model can write a wrong check, so a failing one is shown to the
developer to fix the program OR explain why the check is wrong, and the loop never
counts them as the user's tests (see :mod:`selfheal_jupyter.loop.orchestrator`).
"""

from __future__ import annotations

import ast
import contextlib
import io
import threading
import tokenize
from collections.abc import Callable

from ..codeblocks import extract_code
from ..llm import LLMClient
from ..model import GeneratedChecks, InputDescription
from .inputs import INPUTS_HEADER, format_inputs

SYSTEM = """\
You are the test designer of a coding agent. Before any program is written, you write \
a few independent checks of what the user's task asks for.
Rules:
- Plain Python `assert` statements, one per line, each on its own (no functions, no \
loops, no imports, no prints).
- Only check what the task states clearly: expected results of the named functions or \
variables on small inputs you can work out by hand, and edge cases the task mentions.
- Use only names the task or the program outline defines.
- Reply with ONE fenced ```python block holding the asserts and nothing else."""

MAX_STATEMENT_CHARS = 300


def outline(code: str) -> str:
    """What a program SAYS it does, without its bodies: signatures, docstrings, comments.

    For a repair the checks must come from the intent, not from the (buggy) code.
    """
    try:
        tree = ast.parse(code)
    except SyntaxError:
        tree = None
    lines: list[str] = []
    if tree is not None:
        doc = ast.get_docstring(tree)
        if doc:
            lines.append(f'"""{doc.strip()}"""')
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                head = code.splitlines()[node.lineno - 1].strip()
                lines.append(head)
                doc = ast.get_docstring(node)
                if doc:
                    lines.append(f'    """{doc.strip()}"""')
    lines += comments(code)
    return "\n".join(lines)


def comments(code: str) -> list[str]:
    """The program's comments, in order (lines that start with ``#`` when it does not tokenize)."""
    try:
        return [
            tok.string for tok in tokenize.generate_tokens(io.StringIO(code).readline) if tok.type == tokenize.COMMENT
        ]
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return [ln.strip() for ln in code.splitlines() if ln.strip().startswith("#")]


def build_messages(
    prompt: str,
    inputs: list[InputDescription],
    *,
    initial_code: str | None = None,
    count: int = 3,
) -> list[dict[str, str]]:
    parts = [f"Task:\n{prompt.strip() or 'Make the program described below work.'}"]
    if inputs:
        parts.append(INPUTS_HEADER + "\n" + format_inputs(inputs))
    if initial_code and initial_code.strip():
        parts.append(
            "The program to be repaired, as its author describes it (signatures, "
            "docstrings and comments only; its code may be wrong):\n```python\n"
            f"{outline(initial_code)}\n```"
        )
    parts.append(f"Write at most {count} asserts.")
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "\n\n".join(parts)}]


def parse_checks(text: str, *, count: int, user_tests: str | None = None) -> list[str]:
    """The top-level ``assert`` statements of the reply's code (at most ``count``).

    Anything else (definitions, imports, prints) is dropped: a check must not change the
    program's namespace. A check that repeats one of the user's own is dropped too.
    """
    code = extract_code(text) if "```" in (text or "") else text
    if not code:
        return []
    try:
        tree = ast.parse(code)
    except SyntaxError:
        # keep the lines that parse on their own
        stmts = []
        for line in code.splitlines():
            try:
                stmts.extend(ast.parse(line.strip()).body)
            except SyntaxError:
                continue
    else:
        stmts = tree.body
    user = set()
    if user_tests:
        with contextlib.suppress(SyntaxError):
            user = {ast.dump(s) for s in ast.parse(user_tests).body}
    out: list[str] = []
    seen: set[str] = set()
    for stmt in stmts:
        if not isinstance(stmt, ast.Assert):
            continue
        source = ast.unparse(stmt)
        if len(source) > MAX_STATEMENT_CHARS or ast.dump(stmt) in user or source in seen:
            continue
        seen.add(source)
        out.append(source)
        if len(out) >= count:
            break
    return out


class CheckDesigner:
    def __init__(self, llm: LLMClient) -> None:
        self.llm = llm

    def design(
        self,
        prompt: str,
        inputs: list[InputDescription],
        *,
        count: int,
        initial_code: str | None = None,
        user_tests: str | None = None,
        on_token: Callable[[str], None] | None = None,
        cancel: threading.Event | None = None,
    ) -> GeneratedChecks:
        reply = self.llm.chat(
            build_messages(prompt, inputs, initial_code=initial_code, count=count),
            on_token=on_token,
            cancel=cancel,
        )
        return GeneratedChecks(
            statements=parse_checks(reply.text, count=count, user_tests=user_tests),
            reply=reply.text,
            usage=reply.usage,
            llm_s=reply.duration_s,
        )

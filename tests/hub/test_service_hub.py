"""A class on one JupyterHub: the selfheal service holds the sandbox, the model key and
the policy; two Unix students run their notebooks in their own processes.

Real parts only: PyPI ``jupyterhub`` with the block ``selfheal service --hub-config``
prints, npm ``configurable-http-proxy``, the Docker engine (the service's), the scripted
model (which demands the service's key), nbclient notebooks run by each student (``su``).
Root is needed (useradd, su); the students are not in group docker.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest
import requests

from tests.class_hub import (
    COURSE,
    INSTRUCTOR,
    MODEL_KEY,
    STUDENTS,
    Relay,
    cell_text,
    class_hub,
    last_json,
    notebook,
    start_student,
    student_env,
    wait_until,
)
from tests.conftest import own_containers, wait_no_containers
from tests.scripted_server import Reply, ScriptedServer

pytestmark = [pytest.mark.hub]

MEAN = "def mean(xs):\n    return sum(xs) / (len(xs) + 1)\n\nassert mean([2, 4]) == 3\n"
MEAN_FIX = "```python\ndef mean(xs):\n    return sum(xs) / len(xs)\n\nassert mean([2, 4]) == 3\n```"
AVERAGE = "def average(scores):\n    return sum(scores) // len(scores)\n\nassert average([1, 2]) == 1.5\n"
AVERAGE_FIX_LINE = "return sum(scores) / len(scores)"
AVERAGE_FIX = f"```python\ndef average(scores):\n    {AVERAGE_FIX_LINE}\n\nassert average([1, 2]) == 1.5\n```"
PROSE = "Think about what kind of division gives a whole number, and what the assert expects."

CHECKS = """
import gc, hashlib, json, os
secret = {secret!r}
try:
    open("/var/run/docker.sock", "rb")
    socket_refused = False
except PermissionError:
    socket_refused = True
# Every string this process holds, line by line, against the fix's line (by its hash,
# so this cell never holds the line itself).
seen = set()
def lines(value):
    if isinstance(value, str):
        for line in value.splitlines():
            seen.add(hashlib.sha256(line.strip().encode()).hexdigest())
for obj in gc.get_objects():
    try:
        if isinstance(obj, dict):
            for k, v in obj.items():
                lines(k); lines(v)
        elif isinstance(obj, (list, tuple, set)):
            for v in obj:
                lines(v)
    except Exception:
        pass
record = agent_result.to_dict() if 'agent_result' in dir() else {{}}
print(json.dumps({{
    "socket_refused": socket_refused,
    "key_in_env": any(secret in v for v in os.environ.values()) or "OPENAI_API_KEY" in os.environ,
    "fix_held": {fix_hash!r} in seen,
    "record": json.dumps(record, default=str),
}}))
"""


def _sha(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.strip().encode()).hexdigest()


def test_two_students_heal_and_hint_through_the_service(classroom, docker_client):
    policy = {
        "mode": "full",
        "quota": {"runs": 1, "hints": 2},
        "notebooks": {"hw/*.ipynb": {"mode": "hints", "reveal_fix": False, "max_hints": 3}},
        "groups": {COURSE: {"max_hints": 3}},
    }
    script = [
        Reply(PROSE, match="teacher"),
        Reply(PROSE, match="teacher"),
        Reply(MEAN_FIX, match="def mean("),
        Reply(AVERAGE_FIX, match="def average("),
    ]
    classroom.policy(policy)
    classroom.script(*script)
    hub = classroom.hub
    s1, s2 = classroom.students
    # s1: a token made on the hub's token page (it inherits the user's roles)
    env1 = student_env(s1, hub, hub.token(s1), "lab.ipynb")
    # s2: a token with the server role's scopes, as a kernel's $JUPYTERHUB_API_TOKEN has
    env2 = student_env(s2, hub, hub.token(s2, roles=["server"]), "hw/a1.ipynb")
    relay = Relay(hub.port)  # every byte the hints student's process receives from the service
    env2["SELFHEAL_SERVICE_URL"] = relay.url(hub)
    checks = CHECKS.format(secret=MODEL_KEY, fix_hash=_sha(AVERAGE_FIX_LINE))
    nb1 = notebook(
        "%load_ext selfheal_jupyter",
        "%%heal\n" + MEAN,
        "import json; print(json.dumps({'outcome': agent_result.outcome, 'fix': agent_result.fix.code}))",
        "%%heal\n" + MEAN,
        checks,
    )
    nb2 = notebook(
        "%load_ext selfheal_jupyter",
        "%%hint\n" + AVERAGE,
        "%%hint\n" + AVERAGE,
        "%%hint\n" + AVERAGE,
        "%%heal\n" + AVERAGE,
        checks,
    )
    p1, done1 = start_student(s1, nb1, env1, "lab")
    p2, done2 = start_student(s2, nb2, env2, "a1")
    for proc in (p1, p2):
        out, _ = proc.communicate(timeout=900)
        assert proc.returncode == 0, out.decode(errors="replace")[-3000:]
    import nbformat

    got1 = nbformat.read(done1, as_version=4)
    got2 = nbformat.read(done2, as_version=4)

    # s1 (full): %%heal worked through the service; the second run is over today's quota
    healed = last_json(got1, 2)
    assert healed["outcome"] == "success" and "len(xs)\n" in healed["fix"]
    spent = cell_text(got1, 3)
    assert "runs of today's quota" in spent and "instructor's policy" in spent
    assert len([ln for ln in spent.splitlines() if ln.strip()]) == 1, spent
    facts1 = last_json(got1, 4)
    assert facts1["socket_refused"] and not facts1["key_in_env"]

    # s2 (hints, by the notebook glob): two hints, the third over the quota, %%heal refused
    first, second = cell_text(got2, 1), cell_text(got2, 2)
    assert "Hint 1 of 3" in first and "Hint 2 of 3" in second
    # lines as the student's editor shows them (the %%hint line is line 1), as in a kernel
    assert "It fails on line 5:" in first and "on line 3:" in first, first
    spent = cell_text(got2, 3)
    assert "hints of today's quota" in spent
    refused = cell_text(got2, 4)
    assert "Only hints are allowed here" in refused and "hw/*.ipynb" in refused
    assert len([ln for ln in refused.splitlines() if ln.strip()]) == 1, refused
    facts2 = last_json(got2, 5)
    assert facts2["socket_refused"] and not facts2["key_in_env"]
    # nothing the student's process received holds a line of the verified fix:
    # not its memory, not the record, not the outputs, not the widget state
    assert not facts2["fix_held"]
    assert AVERAGE_FIX_LINE not in facts2["record"]
    assert relay.received and AVERAGE_FIX_LINE.encode() not in relay.received, "the fix went over the wire"
    assert b"HintsFinished" in relay.received
    assert AVERAGE_FIX_LINE not in json.dumps(got2), "the fix reached the notebook (outputs or widget state)"
    assert got2.metadata.get("widgets"), "the hint panel's widget state was saved"

    # the run log on the service lists both students' runs and hints
    log = hub_log(hub)
    users = {e["user"] for e in log}
    assert set(classroom.students) <= users
    assert any(e["user"] == s1 and e["entry"] == "heal" and e.get("outcome") == "success" for e in log)
    hinted = [h for e in log if e["user"] == s2 for h in e.get("hints", [])]
    assert len(hinted) == 2 and all(AVERAGE_FIX_LINE not in h for h in hinted)
    # a student may not read it
    refused_log = requests.get(
        hub.service_url + "api/log", headers={"Authorization": f"token {env1['JUPYTERHUB_API_TOKEN']}"}, timeout=30
    )
    assert refused_log.status_code == 403


def hub_log(hub) -> list[dict]:
    token = hub.token(INSTRUCTOR)
    response = requests.get(hub.service_url + "api/log", headers={"Authorization": f"token {token}"}, timeout=30)
    assert response.status_code == 200, response.text
    return response.json()["entries"]


# ====================================================================== faults
KERNEL = """
import sys
from IPython.core.interactiveshell import InteractiveShell
ip = InteractiveShell.instance()
ip.run_cell("%load_ext selfheal_jupyter")
for path in sys.argv[1:]:
    ip.run_cell(open(path).read())
    print("--- cell done", flush=True)
"""


def kernel(hub, token: str, tmp_path: Path, *cells: str):
    """A kernel-like process (an IPython shell) of the class, running ``cells`` through the
    service; its output (stdout and stderr) is piped."""
    import os
    import subprocess
    import sys

    paths = []
    for i, cell in enumerate(cells):
        path = tmp_path / f"cell{i}.py"
        path.write_text(cell)
        paths.append(str(path))
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}
    env.update(SELFHEAL_SERVICE_URL=hub.service_url, JUPYTERHUB_API_TOKEN=token, DOCKER_HOST="unix:///nonexistent")
    return subprocess.Popen(
        [sys.executable, "-c", KERNEL, *paths],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def _usage_lines(output: str) -> list[str]:
    return [ln for ln in output.splitlines() if ln.startswith("UsageError")]


def test_a_forged_or_expired_token_is_refused_and_nothing_runs(classroom):
    classroom.script(Reply(MEAN_FIX))
    hub, model = classroom.hub, classroom.model
    s1 = classroom.students[0]
    body = {"entry": "heal", "task": {"prompt": "", "initial_code": MEAN}, "notebook": "", "options": {}}
    forged = requests.post(hub.service_url + "api/runs", json=body, headers={"Authorization": "token 0123abcd"})
    assert forged.status_code == 401 and "refused your token" in forged.json()["message"]
    expiring = hub.token(s1, expires_in=1)
    wait_until(lambda: hub.api("GET", "user", token=expiring).status_code in (401, 403), "the token to expire", 30)
    expired = requests.post(hub.service_url + "api/runs", json=body, headers={"Authorization": f"token {expiring}"})
    assert expired.status_code == 401
    narrow = hub.token(s1, scopes=["read:users:name!user"])  # a real token without the service's role
    lacking = requests.post(hub.service_url + "api/runs", json=body, headers={"Authorization": f"token {narrow}"})
    assert lacking.status_code == 403 and "access:services!service=selfheal" in lacking.json()["message"]
    assert model.chat_requests() == []
    assert classroom.log() == []


def test_the_service_restarted_mid_run_is_said_in_one_line_and_the_next_run_works(
    tmp_path, docker_client, sandbox_image
):
    from tests.scripted_server import Fault

    script = [Fault("hang", seconds=300, match="def mean("), Reply(MEAN_FIX, match="def mean(")]
    with (
        ScriptedServer(script, api_key=MODEL_KEY) as model,
        class_hub(tmp_path / "hub", {"mode": "full"}, model.base_url) as hub,
    ):
        token = hub.token(STUDENTS[0])
        proc = kernel(hub, token, tmp_path, "%%heal\n" + MEAN)
        assert model.asked.wait(120), "the service never asked the model"
        first = hub.service_pid()
        assert first is not None
        import os

        os.kill(first, signal.SIGTERM)  # the service restarts (the hub starts it again)
        output, _ = proc.communicate(timeout=600)
        lines = _usage_lines(output)
        assert len(lines) == 1 and "stopped during this run" in lines[0], output
        second = wait_until(lambda: hub.service_up() and hub.service_pid(), "the service to come back", 120)
        assert second != first
        assert not wait_no_containers(docker_client, first), "the stopped service left its containers"
        again = kernel(hub, token, tmp_path, "%%heal\n" + MEAN, "print('outcome', agent_result.outcome)")
        output, _ = again.communicate(timeout=600)
        assert "outcome success" in output, output


def test_a_kernel_killed_mid_run_loses_its_run_and_its_containers(tmp_path, docker_client, sandbox_image):
    slow = "import time\ntime.sleep(300)\nassert False\n"
    with (
        ScriptedServer([], api_key=MODEL_KEY) as model,
        class_hub(
            tmp_path / "hub", {"mode": "full"}, model.base_url, "--SelfHeal.pool_size=0", "--SelfHeal.timeout_s=600"
        ) as hub,
    ):
        token = hub.token(STUDENTS[0])
        service = hub.service_pid()
        proc = kernel(hub, token, tmp_path, "%%heal\n" + slow)
        wait_until(lambda: own_containers(docker_client, service), "the run's container", 120)
        import os

        os.killpg(proc.pid, signal.SIGKILL)  # the kernel dies mid-run
        proc.wait()
        wait_until(lambda: not own_containers(docker_client, service), "the run's containers to go", 120)
        log = (tmp_path / "hub" / "service-log.jsonl").read_text()
        entries = [json.loads(line) for line in log.splitlines()]
        assert entries and entries[-1]["outcome"] == "cancelled"
        assert model.chat_requests() == []


def test_the_hub_down_is_said_in_one_clear_line(tmp_path, sandbox_image):
    with (
        ScriptedServer([], api_key=MODEL_KEY) as model,
        class_hub(tmp_path / "hub", {"mode": "full"}, model.base_url) as hub,
    ):
        token = hub.token(STUDENTS[0])
        hub.stop_hub_only()  # the proxy stays up, as a stopped hub leaves it
        proc = kernel(hub, token, tmp_path, "%%heal\n" + MEAN)
        output, _ = proc.communicate(timeout=300)
        lines = _usage_lines(output)
        assert len(lines) == 1, output
        assert "JupyterHub" in lines[0] and "down" in lines[0] and "Traceback" not in output


def test_selfheal_run_and_plan_only_go_through_the_service_too(classroom, tmp_path):
    import os
    import subprocess
    import sys

    plan = "1. Add the numbers from 1 to 10.\n2. Print the sum."
    script = [Reply(plan, match="Sum the numbers"), Reply(MEAN_FIX, match="def mean(")]
    classroom.script(*script)
    hub = classroom.hub
    token = hub.token(classroom.students[0])
    planned = kernel(
        hub, token, tmp_path, "%%agent --plan-only\nSum the numbers 1 to 10 and print the sum", "print(agent_plan)"
    )
    output, _ = planned.communicate(timeout=600)
    assert "Add the numbers from 1 to 10." in output and "UsageError" not in output, output
    cell = tmp_path / "mean.py"
    cell.write_text(MEAN)
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}
    env.update(SELFHEAL_SERVICE_URL=hub.service_url, JUPYTERHUB_API_TOKEN=token, DOCKER_HOST="unix:///nonexistent")
    ran = subprocess.run(
        [sys.executable, "-m", "selfheal_jupyter.cli", "run", "", "--code", str(cell), "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert ran.returncode == 0, ran.stderr
    record = json.loads(ran.stdout)
    assert record["outcome"] == "success" and "len(xs)\n" in record["fix"]["code"]
    assert [e["entry"] for e in classroom.log()] == ["agent", "run"]

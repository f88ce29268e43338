"""A student against the class service, through its public interfaces only: their own hub
token, raw HTTP to the hub's proxy or straight to the service's port (a student on the
hub's machine reaches it), the notebook path their kernel reports. Each attack here once
worked and fails without its fix.

The class is the lane's shared hub (tests/hub/conftest.py): each test has two students
of its own and writes the policy it needs (the service reads the file again when it changes).
"""

from __future__ import annotations

import json
import select
import socket

import pytest
import requests

from tests.class_hub import COURSE, wait_until
from tests.hub.conftest import NOFILE
from tests.scripted_server import Reply

pytestmark = [pytest.mark.hub]

MEAN = "def mean(xs):\n    return sum(xs) / (len(xs) + 1)\n\nassert mean([2, 4]) == 3\n"
RUNS = "/services/selfheal/api/runs"


def body(entry: str, code: str, notebook: str = "") -> dict:
    return {"entry": entry, "task": {"prompt": "", "initial_code": code}, "notebook": notebook, "options": {}}


def head_only(port: int, token: str, length: int, sent: bytes = b"", path: str = RUNS) -> socket.socket:
    """A request whose head says ``length`` bytes of body follow, of which only ``sent`` do."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=60)
    sock.sendall(
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: token {token}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {length}\r\n\r\n".encode()
        + sent
    )
    return sock


def status_of(sock: socket.socket) -> int:
    """The status of the answer (the socket times out if none comes: the body was awaited)."""
    data = b""
    while b"\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
    sock.close()
    assert data, "the connection closed without an answer"
    return int(data.split()[1])


def test_a_notebook_path_the_kernel_claims_gives_no_more_than_the_course(classroom):
    hub, model = classroom.hub, classroom.model
    classroom.policy(
        {
            "mode": "full",
            "groups": {COURSE: {"mode": "hints", "reveal_fix": False}},
            "notebooks": {"scratch/*.ipynb": {"mode": "full"}},
        },
    )
    token = hub.token(classroom.students[0])
    asked = len(model.chat_requests())
    claimed = requests.post(
        hub.service_url + "api/runs",
        json=body("heal", MEAN, notebook="scratch/mine.ipynb"),
        headers={"Authorization": f"token {token}"},
        timeout=300,
    )
    assert claimed.status_code == 403, claimed.text[-500:]
    assert "Only hints are allowed here" in claimed.json()["message"]
    assert len(model.chat_requests()) == asked


def test_no_body_is_read_before_the_hub_vouched_for_the_token_and_one_student_sends_few(classroom):
    hub = classroom.hub
    classroom.policy({"mode": "full"})
    huge = 200_000_000  # under the largest run request (2 x context_max_bytes + 16 MB)
    # a stranger: answered at once, through the proxy (which passes a request on with its
    # first byte of body) and at the service's own port, on the runs API and anywhere else,
    # without the rest of the body read
    for port, path in ((hub.port, RUNS), (hub.service_port, RUNS), (hub.service_port, RUNS[:-4] + "health")):
        assert status_of(head_only(port, "0123abcd", huge, b"{", path=path)) in (400, 401, 413)
    # a student: no more requests in flight than the queue would keep (one running,
    # service_waiting waiting), so no more of their bodies held
    token = hub.token(classroom.students[1])

    def upload() -> socket.socket:
        return head_only(hub.service_port, token, 10_000_000, b'{"entry": "heal", "task": ')

    uploading = [upload() for _ in range(4)]

    def one_more() -> int:
        return requests.post(
            hub.service_url + "api/runs", json={}, headers={"Authorization": f"token {token}"}
        ).status_code

    def fifth_refused() -> bool:
        # An upload the service already answered holds no place: on a loaded machine the
        # hub may not answer the service's question about its token in time (a 503), so
        # it is sent again; the four that hold places are what the fifth must meet.
        for i, sock in enumerate(uploading):
            if select.select([sock], [], [], 0)[0]:
                sock.close()
                uploading[i] = upload()
        return one_more() == 429

    # once the hub has vouched for the four (asked in the background), a fifth is refused before its body
    # the bound only ends a broken run: a loaded machine once took more than 60 s (the suite on
    # two workers, a Kubernetes cluster starting beside it)
    wait_until(fifth_refused, "a fifth request of the student's to be refused", 180)
    for sock in uploading:
        sock.close()
    assert wait_until(lambda: one_more() == 400, "the dropped uploads to stop counting", 60)
    # JSON nested past Python's recursion limit: a 400 that says so, not a 500
    deep = requests.post(
        hub.service_url + "api/runs", data="[" * 100_000 + "]" * 100_000, headers={"Authorization": f"token {token}"}
    )
    assert deep.status_code == 400 and "nested too deeply" in deep.json()["message"]


def test_a_flood_of_idle_connections_to_the_service_starves_nobody(classroom):
    """A student on the hub's machine opens more connections to the service's port than it
    has files, each sending a request head it never ends (tried with 19,990 against the
    real limit: the service could no longer ask the hub about anybody's token)."""
    hub = classroom.hub
    token = hub.token(classroom.students[1])
    flood = []
    try:
        for _ in range(NOFILE + 200):
            try:
                sock = socket.create_connection(("127.0.0.1", hub.service_port), timeout=5)
            except OSError:
                break  # the service stopped taking connections
            sock.sendall(b"POST " + RUNS.encode() + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            flood.append(sock)
        answer = requests.post(
            hub.service_url + "api/runs", json={}, headers={"Authorization": f"token {token}"}, timeout=60
        )
        assert answer.status_code == 400, answer.text  # heard, checked with the hub, answered
        assert len(flood) == NOFILE + 200
    finally:
        for sock in flood:
            sock.close()


def test_no_stranger_s_body_larger_than_a_form_is_read(classroom):
    """Every request but a run's is read whole before its handler asks the hub who sends it:
    200 connections with no token, each sending a 1 MiB form to the policy page, once held
    229 MB of the service's memory (the number of connections is bounded, their bodies were
    not). A body larger than the instructor's forms is now refused at its head."""
    hub = classroom.hub
    prefix = "/services/selfheal/"
    for path in (prefix + "policy", prefix + "students/x/reset", prefix + "nowhere", RUNS + "/0a/cancel"):
        for sock in [head_only(hub.service_port, "nobody", 1 << 20, path=path) for _ in range(20)]:
            sock.settimeout(30)
            answer = b""
            try:
                while chunk := sock.recv(1 << 16):
                    answer += chunk
            except ConnectionResetError:
                pass
            except TimeoutError:
                raise AssertionError(
                    f"the service waits for a 1 MiB body to {path} before knowing who sends it"
                ) from None
            finally:
                sock.close()
            assert not answer or answer.startswith(b"HTTP/1.1 400"), answer[:200]


def test_a_cell_larger_than_a_run_takes_is_refused_before_the_log_or_a_hint_session_holds_it(classroom):
    """The service read a cell of any size (a run's body may be hundreds of MB for its
    copies) and only the loop refused it: a refusal's log line held the whole cell (a
    student out of quota grew the log and the page's copy of it by each request's size,
    without end), and a hint request made a session holding it for the day (four 21 MB
    cells: the service 120 MB larger). Now it is refused first, in the loop's own words; so is
    a notebook path longer than a path can be."""
    hub = classroom.hub
    classroom.policy({"mode": "off"})
    token = hub.token(classroom.students[0])
    log = hub.folder / "service-log.jsonl"
    before = log.stat().st_size if log.exists() else 0
    huge = MEAN + "# " + "x" * (1 << 20) + "\n"
    for entry in ("hint", "heal", "hint"):
        answer = requests.post(
            hub.service_url + "api/runs", json=body(entry, huge), headers={"Authorization": f"token {token}"}
        )
        assert answer.status_code == 400 and "more than a run takes" in answer.json()["message"], answer.text[:300]
    # nor a notebook path of any length (every request's line holds it)
    answer = requests.post(
        hub.service_url + "api/runs",
        json=body("hint", MEAN, notebook="hw/" + "a" * (1 << 20) + ".ipynb"),
        headers={"Authorization": f"token {token}"},
    )
    assert answer.status_code == 400 and "at most 4096 characters" in answer.json()["message"], answer.text[:300]
    assert (log.stat().st_size if log.exists() else 0) - before < 10_000
    classroom.policy({"mode": "full"})


def test_a_cell_nested_too_deep_is_refused_before_a_quota_run_is_spent(classroom):
    """A hint for a cell `x = 1 + 1 + …` (400 terms): the service ran the loop, pyflakes met
    Python's recursion limit, the kernel was told "No hint this time: Internal error … Run
    %%hint again", and each ask spent a run of the student's daily quota. Now the service
    refuses it before its quotas, saying what nests too deep and what to do."""
    hub = classroom.hub
    classroom.policy({"mode": "hints"})
    token = hub.token(classroom.students[0])
    log = hub.folder / "service-log.jsonl"
    before = log.read_text() if log.exists() else ""
    deep = "x = " + " + ".join(["1"] * 400) + "\nprint(x)\n"
    for _ in range(3):
        answer = requests.post(
            hub.service_url + "api/runs", json=body("hint", deep), headers={"Authorization": f"token {token}"}
        )
        assert answer.status_code == 400, answer.text[-500:]
        message = answer.json()["message"]
        assert "Your code nests deeper than 100 levels at line 1" in message and "Split the expression" in message
    assert (log.read_text() if log.exists() else "") == before  # no run, no hint, no line
    classroom.policy({"mode": "full"})


SPREAD = "def spread(xs):\n    return max(xs)\n\nassert spread([2, 9]) == 7\n"
NEAR_MISS = (
    "```python\ndef spread(xs):\n    return (max(xs) - min(xs)) / (len(xs) - 2)\n\nassert spread([2, 9]) == 7\n```"
)


def test_a_hints_record_quotes_no_line_nor_error_of_the_model_s_attempts(classroom):
    """In hints mode only hints leave the service. The record a hint turn sends back (the
    kernel's agent_result) carried the run's own message, whose advice quotes the
    closest attempt's failing line and the tool's explanation of its error: an honest
    near miss of the model, `(max(xs) - min(xs)) / (len(xs) - 2)`, reached a student whose
    instructor keeps the fix hidden."""
    hub = classroom.hub
    classroom.policy({"mode": "hints", "reveal_fix": False})
    classroom.script(*[Reply(NEAR_MISS, match="def spread(") for _ in range(12)])
    token = hub.token(classroom.students[1])
    answer = requests.post(
        hub.service_url + "api/runs",
        json=body("hint", SPREAD),
        headers={"Authorization": f"token {token}"},
        timeout=600,
    )
    assert answer.status_code == 200, answer.text[-500:]
    end = json.loads(answer.text.strip().splitlines()[-1])
    assert end["event"] == "HintsFinished" and end["data"]["hints"], end
    record = end["data"]["record"]
    assert record["outcome"] != "success" and record["error"], record  # the run ended, and says so
    assert "max(xs) - min(xs)" not in answer.text and "ZeroDivisionError" not in answer.text, record["error"]


AVERAGE = "def average(scores):\n    return sum(scores) // len(scores)\n\nassert average([1, 2]) == 1.5\n"
AVERAGE_FIXED = "```python\n" + AVERAGE.replace("//", "/") + "```"


def hint_turn(classroom, student: str, writer_says: str) -> dict:
    """A student's hint request on AVERAGE (its fix: `//` to `/`), the hint writer scripted
    to say what the student's comment asked of it; the turn's end as the student receives it."""
    classroom.script(Reply(AVERAGE_FIXED, match="def average("), Reply(writer_says, match="teacher"))
    answer = requests.post(
        classroom.hub.service_url + "api/runs",
        json={**body("hint", AVERAGE), "cell_id": "c1"},
        headers={"Authorization": f"token {classroom.hub.token(student)}"},
        timeout=600,
    )
    assert answer.status_code == 200, answer.text[-500:]
    end = json.loads(answer.text.strip().splitlines()[-1])
    assert end["event"] == "HintsFinished" and end["data"]["hints"], end
    return end["data"]


def test_why_the_writer_s_words_were_dropped_does_not_tell_a_student_which_guess_the_fix_has(classroom):
    """Two students each ask the hint writer (in a comment of their cell) to name a guess:
    `/`, which the fix brings, and `%`, which it does not. Both are dropped; the reason
    went back with the hint ("it names an operator the fix changes" against "it quotes
    code the cell does not hold"), an oracle on the fix for anyone who reads the answer."""
    classroom.policy({"mode": "hints", "reveal_fix": False})
    right = hint_turn(classroom, classroom.students[0], "Think about `/` on line 2: work it out by hand.")
    wrong = hint_turn(classroom, classroom.students[1], "Think about `%` on line 2: work it out by hand.")
    assert right["hints"] == wrong["hints"] and right["hints"][0]["check"] == "dropped", right["hints"]
    assert right["record"]["hints"] == wrong["record"]["hints"]
    said = [line.get("check") for line in classroom.log() if line.get("hints")]
    assert said == ["it names an operator the fix changes", "it quotes code the cell does not hold"], said


MEAN_FIXED = "```python\n" + MEAN.replace("(len(xs) + 1)", "len(xs)") + "```"


def test_a_fix_revealed_in_a_cell_reveals_no_other_code_the_student_puts_in_it(classroom):
    """Under ``reveal_fix`` a cell's third hint shows its fix. The cell's next answers
    then carried the whole run of whatever code the student put in the cell (its id kept),
    fix included: another exercise's fix, with a free note, no hint revealing it."""
    classroom.policy({"mode": "hints", "reveal_fix": True})
    classroom.script(
        Reply(AVERAGE_FIXED, match="def average("),
        Reply(MEAN_FIXED, match="def mean("),
        *[Reply("Work through that line by hand for the first input.", match="teacher") for _ in range(4)],
    )
    token = classroom.hub.token(classroom.students[0])

    def ask(code: str) -> dict:
        answer = requests.post(
            classroom.hub.service_url + "api/runs",
            json={**body("hint", code), "cell_id": "c1"},
            headers={"Authorization": f"token {token}"},
            timeout=600,
        )
        assert answer.status_code == 200, answer.text[-500:]
        end = json.loads(answer.text.strip().splitlines()[-1])
        assert end["event"] == "HintsFinished", end
        return end["data"]

    turn = [ask(AVERAGE) for _ in range(3)][-1]  # where, why, the fix
    assert turn["hints"][-1]["level"] == 3 and turn["hints"][-1]["diff"], turn["hints"][-1]
    other = ask(MEAN)  # the same cell, another exercise's code in it
    assert other["note"] and "return sum(xs) / len(xs)" not in json.dumps(other), other["note"]

"""The live panel's wire in a real kernel where no sandbox run is reached. (Its buttons
end to end: tests/notebook/test_panel.py.)"""

from __future__ import annotations

import os
import re

import pytest
from jupyter_client.manager import start_new_kernel

from tests.scripted_server import ScriptedServer
from tests.waiting import wait_until


@pytest.fixture()
def kernel_for():
    started = []

    def start(server: ScriptedServer):
        env = dict(os.environ, OPENAI_BASE_URL=server.base_url, OPENAI_API_KEY="test-key")
        env.pop("SELFHEAL_MODEL", None)
        km, kc = start_new_kernel(kernel_name="python3", env=env, startup_timeout=60)
        started.append((km, kc))
        reply = kc.execute_interactive("%load_ext selfheal_jupyter", timeout=60)
        assert reply["content"]["status"] == "ok"
        return km, kc

    yield start
    for km, kc in started:
        kc.stop_channels()
        km.shutdown_kernel(now=False)


class Wire:
    """Reads the iopub stream of one execution and knows the widgets it opened."""

    def __init__(self, kc, msg_id: str) -> None:
        self.kc, self.msg_id = kc, msg_id
        self.widgets: dict[str, dict] = {}
        self.messages: list[dict] = []
        self.idle = False
        self.extension = False
        self.front_comm: str | None = None
        self.requests: list[dict] = []
        self.reveals: list[dict] = []

    def pump(self, timeout: float = 0.2) -> None:
        try:
            msg = self.kc.get_iopub_msg(timeout=timeout)
        except Exception:  # queue.Empty
            return
        self.messages.append(msg)
        if msg["msg_type"] == "comm_open" and msg["content"].get("target_name") == "jupyter.widget":
            self.widgets[msg["content"]["comm_id"]] = msg["content"]["data"]["state"]
        elif msg["msg_type"] == "comm_open" and msg["content"].get("target_name") == "selfheal-jupyter":
            self.front_comm = msg["content"]["comm_id"]
            if self.extension:  # answer as the labextension does
                self.send(self.front_comm, {"action": "hello", "ok": True})
        elif msg["msg_type"] == "comm_msg" and msg["content"]["comm_id"] == self.front_comm:
            data = msg["content"]["data"]
            (self.reveals if data["action"] == "reveal" else self.requests).append(data)
            self.send(self.front_comm, {"action": data["action"], "request": data["request"], "ok": True})
        elif msg["msg_type"] == "comm_msg":
            state = msg["content"]["data"].get("state")
            if state and msg["content"]["comm_id"] in self.widgets:
                self.widgets[msg["content"]["comm_id"]].update(state)
        elif (
            msg["msg_type"] == "status"
            and msg["content"]["execution_state"] == "idle"
            and msg["parent_header"].get("msg_id") == self.msg_id
        ):
            self.idle = True

    def until(self, predicate, timeout: float, what: str):
        """Read the kernel's messages until ``predicate()`` holds; what it returned."""

        def check():
            found = predicate()
            if found:
                return found
            self.pump()
            # not ``found``: an empty list the predicate returned may be the very list
            # the pump just filled, which is not what the predicate picks from it
            return None

        return wait_until(check, timeout, what, interval=0)

    def find(self, model: str, **attrs) -> str | None:
        for comm_id, state in self.widgets.items():
            if state.get("_model_name") == model and all(state.get(k) == v for k, v in attrs.items()):
                return comm_id
        return None

    def send(self, comm_id: str, data: dict) -> None:
        msg = self.kc.session.msg("comm_msg", {"comm_id": comm_id, "data": data})
        self.kc.shell_channel.send(msg)

    def click(self, comm_id: str) -> None:
        self.send(comm_id, {"method": "custom", "content": {"event": "click"}})

    def set_value(self, comm_id: str, value) -> None:
        """What the front end sends when the user flips a toggle."""
        self.send(comm_id, {"method": "update", "state": {"value": value}, "buffer_paths": []})

    def display_of(self, comm_id: str) -> str | None:
        """A widget's ``layout.display`` (None until known)."""
        layout = self.widgets[comm_id]["layout"].removeprefix("IPY_MODEL_")
        return self.widgets.get(layout, {}).get("display")

    def html(self) -> str:
        return "".join(
            m["content"].get("data", {}).get("text/html", "") for m in self.messages if m["msg_type"] == "display_data"
        )


def execute_in_cell(kc, code: str, cell_id: str) -> str:
    """An execute request as JupyterLab sends it (with the cell's id in the metadata)."""
    content = {
        "code": code,
        "silent": False,
        "store_history": True,
        "user_expressions": {},
        "allow_stdin": False,
        "stop_on_error": True,
    }
    msg = kc.session.msg("execute_request", content, metadata={"cellId": cell_id})
    kc.shell_channel.send(msg)
    return msg["header"]["msg_id"]


def status_text(wire: Wire) -> str:
    return " ".join(str(s.get("value", "")) for s in wire.widgets.values() if s.get("_model_name") == "HTMLModel")


def execute_reply(kc, msg_id: str, timeout: float = 60) -> dict:
    def reply() -> dict | None:
        msg = kc.get_shell_msg(timeout=timeout)
        return msg if msg["parent_header"].get("msg_id") == msg_id else None

    return wait_until(reply, timeout, "the execute reply", interval=0)


def test_autoheal_folds_the_library_frames_of_a_traceback(kernel_for):
    with ScriptedServer([]) as server:
        _, kc = kernel_for(server)
        assert kc.execute_interactive("%agent_autoheal on", timeout=30)["content"]["status"] == "ok"
        msg_id = execute_in_cell(kc, "import json\nconfig = json.loads('{\"a\": 1,}')", "cell-json")
        wire = Wire(kc, msg_id)
        wire.until(lambda: wire.idle, 30, "the cell to end")
        (error,) = [m["content"] for m in wire.messages if m["msg_type"] == "error"]
        assert error["ename"] == "JSONDecodeError"
        text = re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(error["traceback"]))  # no colours
        assert "----> 2 config = json.loads(" in text  # the user's own line
        assert "frames inside json folded: %tb shows the whole traceback" in text
        assert "decoder.py" not in text and "raw_decode" not in text
        out = []
        kc.execute_interactive("%tb", timeout=30, output_hook=lambda m: out.append(m["content"]))
        assert any("raw_decode" in "\n".join(o.get("traceback", [])) for o in out)  # %tb: all of it


def test_in_n_shows_the_cell_as_ipython_writes_it_and_the_line_is_expanded(kernel_for):
    with ScriptedServer([]) as server:
        _, kc = kernel_for(server)
        kc.execute_interactive("bad = 0", timeout=30)
        errors = []
        reply = kc.execute_interactive(
            "%%agent --max-iterations $bad\nPrint hi.", timeout=30, output_hook=lambda m: errors.append(m["content"])
        )
        assert reply["content"]["status"] == "error"
        # $bad was expanded before parsing (else: "invalid int value: '$bad'")
        assert any("max_iterations must be at least 1, not 0" in str(e) for e in errors), errors
        out = []
        kc.execute_interactive(
            "print(In[-2])", timeout=30, output_hook=lambda m: out.append(m["content"].get("text", ""))
        )
        assert "".join(out).strip() == "get_ipython().run_cell_magic('agent', '--max-iterations $bad', 'Print hi.\\n')"

"""The instant explanation in the live panel, before the model says anything.

A real kernel runs ``%%heal`` cells whose failure the notebook's context explains (a
close column, attribute or name; ``.dt`` or arithmetic on a text column; a shape
mismatch). The scripted model's reply is HELD until the test has seen the explanation in
the panel's widgets (played on the wire as JupyterLab would), so it was shown before the
first model token; then the reply is released and the run ends. The same facts reached
the model: its request holds the diagnosis. And a busy shared model server is said in the
panel: "waiting for the model — 2 requests ahead".
"""

from __future__ import annotations

import os
import threading

import pytest
from jupyter_client.manager import start_new_kernel

from tests.scripted_server import Reply, ScriptedServer
from tests.unit.test_diagnosis import SALES_NOTEBOOK
from tests.unit.test_panel import Wire, execute_reply

NOTEBOOK = SALES_NOTEBOOK + "total_units = 10\n"


@pytest.fixture(scope="module")
def kernel():
    env = dict(os.environ, OPENAI_API_KEY="test-key")
    env.pop("SELFHEAL_MODEL", None)
    km, kc = start_new_kernel(kernel_name="python3", env=env, startup_timeout=60)
    try:
        for cell in (
            "%load_ext selfheal_jupyter",
            "%config SelfHeal.model = 'scripted-model'",
            "%config SelfHeal.quick_fixes = False",  # the model, not the tool's own edit, answers here
            NOTEBOOK,
        ):
            assert kc.execute_interactive(cell, timeout=60)["content"]["status"] == "ok"
        yield kc
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=False)


def panel_text(wire: Wire) -> str:
    return " ".join(str(s.get("value", "")) for s in wire.widgets.values() if s.get("_model_name") == "HTMLModel")


CASES = [
    pytest.param(
        "totals = sales.groupby('Region')['units'].sum()\nprint(totals)",
        "Region</code> is not a column of <code",  # backticks become code
        id="key-error",
    ),
    pytest.param("print(sales.unit.sum())", "unit</code>; <code", id="attribute-error"),
    pytest.param("print(total_unit * 2)", "total_unit</code> is not defined; <code", id="name-error"),
    pytest.param(
        "print(sales['date'].dt.month.tolist())", "holds text (dtype str, dates as text), not dates", id="dt-on-text"
    ),
    pytest.param(
        "print((sales['price'] / sales['units']).mean())",
        "holds text (dtype str, numbers as text): arithmetic on it fails",
        id="arithmetic-on-text",
    ),
    pytest.param("print(np.dot(marks, weights))", "The shapes do not match:", id="shape-mismatch"),
]


@pytest.mark.sandbox
@pytest.mark.parametrize("cell, said", CASES)
def test_the_explanation_is_shown_before_the_first_model_token(kernel, cell, said):
    release = threading.Event()
    reply = Reply("```python\nprint('fixed')\n```", hold=release)
    with ScriptedServer([reply]) as server:
        kc = kernel
        assert kc.execute_interactive(f"%config SelfHeal.base_url = '{server.base_url}'", timeout=30)
        msg_id = kc.execute(f"%%heal --max-iterations 1\n{cell}")
        wire = Wire(kc, msg_id)
        try:
            wire.until(lambda: "selfheal-explanation" in panel_text(wire) and said in panel_text(wire), 60, said)
            assert not release.is_set()  # shown while the model's reply is still held back
            assert "Why it failed" in panel_text(wire)
        finally:
            release.set()
        execute_reply(kc, msg_id, timeout=120)
        wire.until(lambda: wire.idle, 30, "the cell to end")
        request = server.chat_requests()[0]["messages"][1]["content"]
    assert reply.held.is_set()  # the model was asked, and answered only once released
    assert "What the tool found from the notebook's context:" in request  # the same facts, to the model


@pytest.mark.sandbox
def test_a_busy_shared_model_is_said_in_the_panel(kernel):
    release = threading.Event()
    reply = Reply("```python\nprint(sales['units'].sum())\n```", hold=release)
    with ScriptedServer([reply]) as server:
        server.slots, server.others = 2, 3  # two served, one waiting: ours comes after 3
        kc = kernel
        assert kc.execute_interactive(f"%config SelfHeal.base_url = '{server.base_url}'", timeout=30)
        msg_id = kc.execute("%%agent --no-plan --max-iterations 1\nPrint the total units in sales.")
        wire = Wire(kc, msg_id)
        try:
            wire.until(lambda: "waiting for the model — 3 requests ahead" in panel_text(wire), 60, "the queue")
            server.others = 2  # one fewer in the queue
            wire.until(lambda: "waiting for the model — 2 requests ahead" in panel_text(wire), 60, "the queue move")
        finally:
            release.set()
        execute_reply(kc, msg_id, timeout=120)
        wire.until(lambda: wire.idle, 30, "the cell to end")

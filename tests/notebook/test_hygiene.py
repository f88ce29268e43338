"""Output hygiene end to end: a hostile ``_repr_html_`` through the real sandbox is clean
in every place it is shown, and a malformed result never leaves ``execute``.
(The frame checks alone: tests/unit/test_hygiene.py.)"""

from __future__ import annotations

import pytest

from selfheal_jupyter.config import SelfHeal
from selfheal_jupyter.model import (
    ExecutionResult,
)
from tests.unit.test_hygiene import HOSTILE_HTML

# --------------------------------------------------------------------------- end to end
HOSTILE_CANDIDATE = f"""\
class Table:
    def _repr_html_(self):
        return {HOSTILE_HTML!r} + "\\udc80"
Table()
"""


def test_a_hostile_repr_html_through_the_real_sandbox_is_clean_everywhere(shell_with_server, tmp_path):
    """%%agent → sandbox → agent_result, the inline HTML, %agent_export and nbconvert."""
    import nbformat
    from IPython.utils.capture import capture_output
    from nbconvert import HTMLExporter

    shell = shell_with_server
    with capture_output() as cap:
        result = shell.run_cell("%%agent --no-plan --max-iterations 1\nShow a table.")
    assert result.success, cap.stderr
    record = shell.user_ns["agent_result"]
    sandbox_result = record.iterations[0].result
    assert sandbox_result.status == "ok", sandbox_result
    mimes = [o.mime for o in sandbox_result.outputs]
    assert mimes == ["text/html", "text/plain"]
    html = sandbox_result.outputs[0].data
    assert html.startswith('<table border="1">') and "1\ufffd" in html and html.endswith("x\ufffd")
    assert "<script" not in html and "class=" not in html
    shown = "".join(o.data.get("text/html", "") for o in cap.outputs)
    shown.encode("utf-8")
    # The candidate's code is shown too, escaped; its markup must not appear live.
    assert "<td>1\ufffd</td>" in shown
    for live in LIVE_MARKUP:
        assert live not in shown, live

    with capture_output():
        shell.run_cell(f"%agent_export {tmp_path}/run.ipynb")
    page, _ = HTMLExporter().from_notebook_node(nbformat.read(tmp_path / "run.ipynb", as_version=4))
    assert "<td>1\ufffd</td>" in page
    for live in LIVE_MARKUP:
        assert live not in page, live


LIVE_MARKUP = (
    "<script>fetch(",
    "<td onclick=",
    "<table class=",
    "<th class=",
    '<img src="http://evil',
    '<a href="javascript:',
)
"""The hostile markup as it would appear if it were live (escaped, it starts with &lt;)."""


@pytest.fixture()
def shell_with_server(sandbox_image):
    from tests.conftest import selfheal_shell
    from tests.scripted_server import Reply, ScriptedServer

    with (
        ScriptedServer([Reply(f"```python\n{HOSTILE_CANDIDATE}```")]) as server,
        selfheal_shell(
            f"%config SelfHeal.base_url = '{server.base_url}'", "%config SelfHeal.model = 'scripted-model'"
        ) as ip,
    ):
        yield ip


def test_a_malformed_result_does_not_leave_execute_and_its_container_is_replaced(
    sandbox_image, docker_client, monkeypatch
):
    """The real runner sends well-formed frames; the host's reaction to one that is not
    is forced here by standing in for the validation's verdict."""
    from selfheal_jupyter.sandbox import docker as sandbox_docker
    from selfheal_jupyter.sandbox import pool

    hostname = "import socket\nprint(socket.gethostname())\n"
    with sandbox_docker.DockerSandbox.from_config(SelfHeal(pool_size=1), client=docker_client) as sb:
        before = sb.execute(hostname)
        assert sb.execute(hostname).stdout == before.stdout  # the warm container is reused
        with monkeypatch.context() as patch:
            patch.setattr(pool, "read_result", lambda frame: ExecutionResult.malformed("forged"))
            bad = sb.execute(hostname)
        assert bad.is_malformed and bad.status == "error" and "forged" in bad.message
        after = sb.execute(hostname)
        assert after.ok and after.stdout != before.stdout  # a fresh container

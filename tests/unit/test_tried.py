"""What a program tried, as the result says it, without a sandbox run. (Seen by the
runner's server in the real sandbox: tests/sandbox/test_tried.py.)"""

from __future__ import annotations

import textwrap

from selfheal_jupyter.result_json import read_result


def tried(sandbox, code: str) -> dict[str, str]:
    result = sandbox.execute(textwrap.dedent(code))
    assert result.status == "ok", (result.error, result.stderr)
    return {a.kind: a.evidence for a in result.tried}


def test_a_result_that_breaks_the_schema_of_tried_is_malformed():
    base = {"status": "ok", "exit_code": 0, "stdout": "", "stderr": "", "error": None, "outputs": [], "tests": []}
    assert read_result(base).tried == []  # an older runner says nothing
    bad = read_result({**base, "tried": [{"kind": "telepathy", "count": 1, "evidence": ""}]})
    assert bad.is_malformed and "tried[0].kind" in bad.error.message

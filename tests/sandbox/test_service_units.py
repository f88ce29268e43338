"""The class service's hint writer on the real sandbox: its tokens count against the
quota. (The service's other parts without a hub: tests/unit/test_service_units.py.)"""

from __future__ import annotations

import json

from selfheal_jupyter.config import SelfHeal
from selfheal_jupyter.model import (
    Task,
)
from selfheal_jupyter.service.runs import Request
from selfheal_jupyter.teaching.policy import Policy


def test_the_hint_writer_s_tokens_count_against_the_token_quota(tmp_path, sandbox_image):
    """With ``hint_prose`` every hint asks the model again, and those tokens were not in the
    log: a student past their token quota's worth of hints kept spending the model."""
    import threading

    from selfheal_jupyter.service.log import RunLog
    from selfheal_jupyter.service.runs import Service
    from tests.scripted_server import Reply, ScriptedServer

    mean = "def mean(xs):\n    return sum(xs) / (len(xs) + 1)\n\nassert mean([2, 4]) == 3\n"
    fix = "```python\ndef mean(xs):\n    return sum(xs) / len(xs)\n\nassert mean([2, 4]) == 3\n```"
    with ScriptedServer([Reply(fix) for _ in range(12)]) as model:
        settings = SelfHeal(base_url=model.base_url, model="scripted-model", hint_prose=True)
        service = Service(settings, policy=None, log=RunLog(tmp_path / "log.jsonl"))
        service.start()
        try:
            request = Request("hint", Task(prompt="", initial_code=mean), "", {})
            for _ in range(2):
                service.work("ann", request, Policy(mode="hints"), lambda event: None, threading.Event())
        finally:
            service.close()  # its log and its containers
    first, second = (json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines())
    assert second["runs"] == 0 and second.get("hints"), second  # the second hint needed no run: only the writer
    assert second["tokens"] > 0, second

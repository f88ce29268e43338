"""Configuration → ready loop: endpoint resolution, shared sandbox, build_loop."""

from __future__ import annotations

import pytest

from selfheal_jupyter.config import SelfHeal
from selfheal_jupyter.errors import EngineUnavailable, LocalModelUnavailable
from selfheal_jupyter.factory import (
    KEYLESS,
    build_llm,
    build_loop,
    resolve_endpoint,
)
from tests.scripted_server import ScriptedServer


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "SELFHEAL_MODEL"):
        monkeypatch.delenv(name, raising=False)


def test_configured_url_and_first_listed_model(monkeypatch):
    with ScriptedServer([], model="listed-model", api_key="secret") as s:
        monkeypatch.setenv("OPENAI_API_KEY", "secret")
        ep = resolve_endpoint(SelfHeal(base_url=s.base_url + "/"))
        assert (ep.base_url, ep.api_key, ep.model, ep.local) == (s.base_url, "secret", "listed-model", False)


def test_environment_gives_url_and_model(monkeypatch):
    with ScriptedServer([]) as s:
        monkeypatch.setenv("OPENAI_BASE_URL", s.base_url)
        monkeypatch.setenv("SELFHEAL_MODEL", "from-env")
        ep = resolve_endpoint(SelfHeal())
        assert ep.base_url == s.base_url and ep.model == "from-env"
        assert ep.api_key == KEYLESS  # keyless local servers still get a key string
        assert s.requests == []  # the model was named: /v1/models not asked


def test_no_url_means_the_embedded_model(monkeypatch):
    # An unknown embedded model name proves resolution went to the local model.
    with pytest.raises(LocalModelUnavailable, match="Unknown embedded model"):
        resolve_endpoint(SelfHeal(local_model="no-such-local-model"))


def test_build_llm_applies_settings():
    with ScriptedServer([]) as s:
        llm = build_llm(
            SelfHeal(base_url=s.base_url, model="m", llm_timeout_s=7, llm_max_retries=5, temperature=0.4, max_tokens=99)
        )
        assert (llm.timeout_s, llm.max_retries, llm.temperature, llm.max_tokens) == (7, 5, 0.4, 99)


def test_sandbox_unavailable_raises_the_package_error(monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent.sock")
    with ScriptedServer([]) as s, pytest.raises(EngineUnavailable, match="DOCKER_HOST"):
        build_loop(SelfHeal(base_url=s.base_url, model="m", timeout_s=11))


def test_the_embedded_model_gets_its_measured_options_unless_the_user_gave_them():
    from traitlets.config import Config

    from selfheal_jupyter.factory import tuned_settings
    from selfheal_jupyter.llm import Endpoint

    embedded, hosted = Endpoint("http://x/v1", "k", "m", local=True), Endpoint("http://x/v1", "k", "m")
    tuned = tuned_settings(SelfHeal(), embedded)
    assert (tuned.candidates, tuned.plan_on_heal) == (3, False)
    # a slow local writer may stream for minutes; a hosted model keeps the default
    assert tuned.llm_timeout_s > SelfHeal().llm_timeout_s == tuned_settings(SelfHeal(), hosted).llm_timeout_s
    assert tuned_settings(SelfHeal(llm_timeout_s=30), embedded).llm_timeout_s == 30
    assert (tuned_settings(SelfHeal(), hosted).candidates, SelfHeal().candidates) == (1, 1)
    # given on purpose, even at the default value: by keyword, by %config, per call
    assert tuned_settings(SelfHeal(candidates=1), embedded).candidates == 1
    config = Config()
    config.SelfHeal.candidates = 1
    assert tuned_settings(SelfHeal(config=config), embedded).candidates == 1
    per_call = SelfHeal().with_values(candidates=1, plan_on_heal=True)
    assert (tuned_settings(per_call, embedded).candidates, tuned_settings(per_call, embedded).plan_on_heal) == (1, True)
    assert tuned_settings(SelfHeal().with_values(quiet=True), embedded).candidates == 3

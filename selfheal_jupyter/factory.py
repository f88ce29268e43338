"""The one place that turns configuration into a ready loop.

The magic, the CLI and the evaluation harness all call :func:`build_loop`, so none
of them wires endpoint, sandbox and agents on its own and they cannot drift apart.

Endpoint resolution, in order: a configured ``SelfHeal.base_url`` (whose default is
``$OPENAI_BASE_URL``), else the embedded local model. The API key comes from
``$OPENAI_API_KEY`` only (a dummy for keyless local servers); the model name from
``SelfHeal.model`` (default ``$SELFHEAL_MODEL``), else the endpoint's first listed
model.
"""

from __future__ import annotations

import atexit
import os
import threading
from typing import Any

from .config import SelfHeal
from .errors import LLMError, SelfHealError
from .llm import Endpoint, LLMClient
from .loop import Loop, Strategies
from .sandbox.base import Sandbox

KEYLESS = "sk-no-key-required"
"""Sent to servers that need no key (Ollama, llama.cpp, the embedded model)."""


def resolve_endpoint(settings: SelfHeal) -> Endpoint:
    """Where the model is: configured URL, else the embedded model (started on first use)."""
    base_url = (settings.base_url or "").strip()
    api_key = os.environ.get("OPENAI_API_KEY", "").strip()
    model = (settings.model or "").strip()
    if base_url:
        endpoint = Endpoint(base_url.rstrip("/"), api_key or KEYLESS, model, local=False)
    else:
        from .localmodel import ensure_local_endpoint

        local_url, local_model = ensure_local_endpoint(settings)
        endpoint = Endpoint(local_url.rstrip("/"), KEYLESS, model or local_model, local=True)
    if not endpoint.model:
        endpoint = Endpoint(
            endpoint.base_url, endpoint.api_key, _first_model(endpoint, settings), endpoint.local
        )
    return endpoint


def _first_model(endpoint: Endpoint, settings: SelfHeal) -> str:
    client = LLMClient(endpoint, timeout_s=min(settings.llm_timeout_s, 30.0), max_retries=1)
    try:
        models = client.list_models()
    finally:
        client.close()
    if not models:
        raise LLMError(
            f"The endpoint {endpoint.base_url} lists no models. Name one with "
            "`%config SelfHeal.model = 'NAME'` (CLI --model, or SELFHEAL_MODEL)."
        )
    return models[0]


def build_llm(settings: SelfHeal, endpoint: Endpoint | None = None) -> LLMClient:
    """An LLM client with the configured timeout, retries and sampling.

    For the embedded model, the sampling the local-model engineer measured as best
    for it is used where the user kept the defaults.
    """
    endpoint = endpoint or resolve_endpoint(settings)
    temperature, max_tokens = settings.temperature, settings.max_tokens
    if endpoint.local:
        tuned = _local_tuning(settings)
        if tuned is not None:
            if not _is_set(settings, "temperature"):
                temperature = tuned.temperature
            if not _is_set(settings, "max_tokens"):
                max_tokens = tuned.max_tokens
    return LLMClient(
        endpoint,
        timeout_s=settings.llm_timeout_s,
        max_retries=settings.llm_max_retries,
        temperature=temperature,
        max_tokens=max_tokens,
    )


def _local_tuning(settings: SelfHeal) -> Any:
    try:
        from .localmodel.tuning import recommended_settings
    except ImportError:
        return None
    try:
        return recommended_settings(settings.local_model)
    except Exception:  # noqa: BLE001 - tuning is an optimisation, never a failure
        return None


def _is_set(settings: SelfHeal, name: str) -> bool:
    """True when the user moved the trait away from its default."""
    return getattr(settings, name) != settings.traits()[name].default_value


# ---------------------------------------------------------------------- sandbox
_sandboxes: dict[tuple[Any, ...], Sandbox] = {}
_sandbox_lock = threading.Lock()


def _sandbox_key(settings: SelfHeal) -> tuple[Any, ...]:
    limits = settings.limits()
    return (
        settings.image,
        limits.timeout_s,
        limits.memory,
        limits.pids,
        limits.cpus,
        limits.output_bytes,
        limits.tmpfs_size,
        settings.pool_size,
        settings.runtime,
    )


def shared_sandbox(settings: SelfHeal) -> Sandbox:
    """One warm Docker sandbox per process per image/limits, reused across cells.

    Started on first use (raises the sandbox's own error when the engine or the image
    is missing); closed when the process exits.
    """
    key = _sandbox_key(settings)
    with _sandbox_lock:
        sandbox = _sandboxes.get(key)
        if sandbox is None:
            from .sandbox.docker import DockerSandbox

            sandbox = DockerSandbox.from_config(settings)
            sandbox.start()
            _sandboxes[key] = sandbox
        return sandbox


def sandbox_packages(settings: SelfHeal) -> dict[str, str] | None:
    """``{distribution: version}`` the sandbox image has (None when that cannot be told:
    the run then reports the engine or image problem itself)."""
    try:
        sandbox = shared_sandbox(settings)
        from .sandbox.image import image_packages

        return image_packages(sandbox.client, sandbox.ref)  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 - the loop says what is wrong with the sandbox
        return None


def close_shared_sandboxes() -> None:
    """Close every shared sandbox (every container is removed)."""
    with _sandbox_lock:
        boxes = list(_sandboxes.values())
        _sandboxes.clear()
    for box in boxes:
        try:
            box.close()
        except SelfHealError:
            pass


atexit.register(close_shared_sandboxes)


# ---------------------------------------------------------------------- loop
def build_loop(
    settings: SelfHeal,
    *,
    sandbox: Sandbox | None = None,
    llm: LLMClient | None = None,
) -> Loop:
    """A ready loop for ``settings`` (per-call overrides: ``SelfHeal(parent=..., ...)``).

    Raises the package's own errors (endpoint, embedded model, sandbox) with a
    message that says what to do.
    """
    llm = llm or build_llm(settings)
    sandbox = sandbox or shared_sandbox(settings)
    retry_temperature = 0.8
    plan_on_heal = True
    if llm.endpoint.local:
        tuned = _local_tuning(settings)
        if tuned is not None:
            retry_temperature = tuned.retry_temperature
            plan_on_heal = tuned.plan_on_heal
    return Loop(
        llm,
        sandbox,
        max_iterations=settings.max_iterations,
        token_budget=settings.token_budget,
        time_budget_s=settings.time_budget_s,
        auto_plan=settings.auto_plan,
        limits=settings.limits(),
        retry_temperature=retry_temperature,
        plan_on_heal=plan_on_heal,
        strategies=Strategies(
            generated_checks=settings.generated_checks,
            candidates=settings.candidates,
            runtime_values=settings.runtime_values,
            explain_first=settings.explain_first,
            restart_after=settings.restart_after,
        ),
    )

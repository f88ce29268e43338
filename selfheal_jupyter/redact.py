"""Secrets out of what goes to a model: a local variable, a runtime value, a dict key.

Why by name and by look: the failing frame's locals and the values at the failing
statement go to the model as feedback (and to the hint writer). A variable named
``api_key`` or ``password``, or a value that looks like a key or a bearer token, is
replaced by ``<redacted>``: the model needs to know it is there, never what it is.
"""

from __future__ import annotations

import re

REDACTED = "<redacted>"

_SECRET_WORDS = frozenset(
    [
        "password",
        "passwords",
        "passwd",
        "pwd",
        "passphrase",
        "secret",
        "secrets",
        "token",
        "tokens",
        "apikey",
        "credential",
        "credentials",
        "auth",
        "authorization",
        "bearer",
        "cookie",
        "cookies",
        "signature",
        "sessionid",
        "privatekey",
        "accesskey",
    ]
)
_KEY_OF = frozenset(["api", "access", "private", "secret", "signing", "encryption", "ssh"])
_PARTS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
_SECRET_VALUE = re.compile(
    r"sk-[A-Za-z0-9_-]{8,}"  # OpenAI-style keys
    r"|(?i:bearer|basic|token)\s+[A-Za-z0-9._~+/=-]{8,}"
    r"|gh[pousr]_[A-Za-z0-9]{16,}"  # GitHub tokens
    r"|xox[abprs]-[A-Za-z0-9-]{8,}"  # Slack tokens
    r"|AKIA[0-9A-Z]{16}"  # AWS access key ids
    r"|AIza[0-9A-Za-z_-]{20,}"  # Google API keys
    r"|eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"  # JWTs
    r"|-----BEGIN [A-Z ]*PRIVATE KEY-----"
    r"|(?i:(password|passwd|pwd|secret|token|api_?key)['\"]?\s*[=:]\s*\S{4,})"  # also a dict's key
    r"|://[^/\s:@]+:[^/\s@]+@"  # a password inside a URL
)


def secret_name(name: str) -> bool:
    """``name`` says it holds a secret (``api_key``, ``password``, ``auth_token``...)."""
    parts = [p.lower() for p in _PARTS.findall(name)]
    return any(p in _SECRET_WORDS or (p == "key" and i > 0 and parts[i - 1] in _KEY_OF) for i, p in enumerate(parts))


def secret_value(text: str) -> bool:
    """``text`` holds something that looks like a key, a token or a password."""
    return bool(_SECRET_VALUE.search(text))


def redact_value(name: str, text: str) -> str:
    """``text`` (the summary of the value of ``name``), or ``<redacted>`` when the name
    or the value looks like a secret."""
    return REDACTED if secret_name(name) or secret_value(text) else text

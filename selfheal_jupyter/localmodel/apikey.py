"""The key the embedded model's server demands of every request.

Why: any local user or process can reach a loopback port. The server refuses requests
without a key made at random when it starts; the key travels in the server process's
environment (:data:`API_KEY_ENV`: a command line is readable by every user, an
environment only by ours) and in the shared server's state file (readable by our
user only), never on a command line.
"""

from __future__ import annotations

import os
import urllib.request

API_KEY_ENV = "SELFHEAL_LOCAL_API_KEY"
"""Where the server process finds its key (set by whoever starts it)."""


def api_key() -> str:
    """The key this server process demands (it refuses to serve without one)."""
    key = os.environ.get(API_KEY_ENV, "")
    if not key:
        raise SystemExit(f"{API_KEY_ENV} is not set: the model server needs an API key")
    return key


def authorized(url: str) -> urllib.request.Request:
    """A request of the server process to its own server (or backend), with its key."""
    return urllib.request.Request(url, headers={"Authorization": f"Bearer {api_key()}"})

"""The local Kubernetes the ``kubernetes`` tests run their pods on: started (and its
binaries built once, cached) by ``sandbox/setup-kubernetes.sh``, stopped at the end of
the session when the session started it.

``make test`` starts the build in the background before the suite, and pytest runs the
``kubernetes`` tests last: the cluster's start waits for that build (a lock) while the
other tests run.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "sandbox" / "setup-kubernetes.sh"
#: The backends a sandbox contract test runs on (``-m 'not kubernetes'`` leaves pods out).
SANDBOX_BACKENDS = ["docker", pytest.param("kubernetes", marks=pytest.mark.kubernetes)]


def setup(*args: str, timeout: float = 3600) -> subprocess.CompletedProcess[str]:
    """``sandbox/setup-kubernetes.sh ARGS`` (as this user: root)."""
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout)


def running() -> str | None:
    """The cluster's kubeconfig when it runs, else None."""
    proc = setup("status", timeout=60)
    if proc.returncode != 0:
        return None
    return proc.stdout.strip().partition("=")[2] or None


def start() -> str:
    """Start the cluster (building its binaries first if no cache has them); its kubeconfig."""
    proc = setup("start")
    if proc.returncode != 0:
        pytest.fail(
            f"The local Kubernetes did not start (bash sandbox/setup-kubernetes.sh start): {proc.stderr[-3000:]}",
            pytrace=False,
        )
    return proc.stdout.strip().splitlines()[-1].partition("=")[2]


def stop() -> None:
    setup("stop", timeout=300)


def load_image(ref: str) -> None:
    """The sandbox image onto the node's engine (a no-op when it is there)."""
    proc = setup("image", ref, timeout=600)
    if proc.returncode != 0:
        pytest.fail(f"The sandbox image could not be put on the node: {proc.stderr[-2000:]}", pytrace=False)


def core_api(kubeconfig: str) -> Any:
    from kubernetes import client, config

    configuration = client.Configuration()
    config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
    return client.CoreV1Api(client.ApiClient(configuration))


def selfheal_pods(kubeconfig: str, selector: str = "app=selfheal") -> list[str]:
    """Names of the sandbox pods in the cluster (what ``kubectl get pods -l app=selfheal`` lists)."""
    return [p.metadata.name for p in core_api(kubeconfig).list_pod_for_all_namespaces(label_selector=selector).items]


def api_port(kubeconfig: str) -> int:
    """The port of the API server (it listens on 127.0.0.1)."""
    server = yaml.safe_load(Path(kubeconfig).read_text())["clusters"][0]["cluster"]["server"]
    return int(server.rsplit(":", 1)[1])


def relayed_kubeconfig(kubeconfig: str, port: int, folder: Path) -> str:
    """A copy of ``kubeconfig`` whose API server is at 127.0.0.1:``port`` (a relay's)."""
    config = yaml.safe_load(Path(kubeconfig).read_text())
    config["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{port}"
    path = folder / "relayed.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return str(path)


def kubectl(kubeconfig: str, *args: str) -> subprocess.CompletedProcess[str]:
    """The cluster's own kubectl (Debian's, of the same release)."""
    cache = Path(os.environ.get("SELFHEAL_KUBERNETES_CACHE", Path.home() / ".cache/selfheal-jupyter/kubernetes"))
    binary = next(cache.glob("*/bin/kubectl"))
    return subprocess.run([str(binary), "--kubeconfig", kubeconfig, *args], capture_output=True, text=True, timeout=120)

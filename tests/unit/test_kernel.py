"""The "Python 3 (self-healing)" kernel: installs into a prefix, is listed by
``jupyter kernelspec list``, starts, and has the magics loaded without %load_ext."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager


@pytest.fixture()
def prefix(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "selfheal_jupyter", "kernel", "install", "--prefix", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert "Installed kernelspec 'selfheal'" in out.stdout
    return tmp_path


def test_install_writes_a_kernelspec_jupyter_lists(prefix):
    spec_dir = prefix / "share" / "jupyter" / "kernels" / "selfheal"
    spec = json.loads((spec_dir / "kernel.json").read_text())
    assert spec["display_name"] == "Python 3 (self-healing)"
    assert spec["argv"][:3] == [sys.executable, "-m", "selfheal_jupyter.kernel"]
    env = dict(os.environ, JUPYTER_PATH=str(prefix / "share" / "jupyter"))
    listed = subprocess.run(
        ["jupyter", "kernelspec", "list", "--json"], capture_output=True, text=True, env=env, timeout=60
    )
    assert listed.returncode == 0, listed.stderr
    specs = json.loads(listed.stdout)["kernelspecs"]
    assert specs["selfheal"]["spec"]["display_name"] == "Python 3 (self-healing)"


def test_kernel_starts_with_the_extension_loaded(prefix):
    ksm = KernelSpecManager(kernel_dirs=[str(prefix / "share" / "jupyter" / "kernels")])
    km = KernelManager(kernel_name="selfheal", kernel_spec_manager=ksm)
    km.start_kernel()
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=60)
        code = (
            "ip = get_ipython()\n"
            "print(sorted(n for n in ('agent', 'heal') if ip.find_cell_magic(n)),"
            " sorted(n for n in ('agent_export', 'agent_autoheal') if ip.find_line_magic(n)),"
            " 'selfheal_jupyter' in ip.extension_manager.loaded)"
        )
        reply = kc.execute_interactive(code, timeout=60, output_hook=_collect)
        assert reply["content"]["status"] == "ok"
        assert _collect.text.strip() == "['agent', 'heal'] ['agent_autoheal', 'agent_export'] True"
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def _collect(msg):
    if msg["msg_type"] == "stream":
        _collect.text += msg["content"]["text"]


_collect.text = ""

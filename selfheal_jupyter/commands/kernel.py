"""``selfheal kernel install|uninstall``: the "Python 3 (self-healing)" kernelspec."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from importlib import resources
from pathlib import Path

from ..errors import BadInput

# What `jupyter kernelspec list` shows; the kernel itself is selfheal_jupyter/kernel.py.
KERNEL_NAME = "selfheal"
DISPLAY_NAME = "Python 3 (self-healing)"


def kernelspec_dir(target: Path, python: str | None = None) -> Path:
    """Write the kernelspec (kernel.json + logos) into ``target``; argv uses ``python``."""
    source = resources.files("selfheal_jupyter") / "kernelspec"
    target.mkdir(parents=True, exist_ok=True)
    for entry in source.iterdir():
        if entry.is_file() and entry.name != "kernel.json":
            (target / entry.name).write_bytes(entry.read_bytes())
    spec = json.loads((source / "kernel.json").read_text(encoding="utf-8"))
    spec["argv"][0] = python or sys.executable
    spec["display_name"] = DISPLAY_NAME
    (target / "kernel.json").write_text(json.dumps(spec, indent=1) + "\n", encoding="utf-8")
    return target


def install(*, user: bool = False, prefix: str | None = None, name: str = KERNEL_NAME) -> str:
    """Install the kernelspec with jupyter_client; returns the installed directory."""
    from jupyter_client.kernelspec import KernelSpecManager

    with tempfile.TemporaryDirectory() as tmp:
        spec_dir = kernelspec_dir(Path(tmp) / name)
        try:
            return KernelSpecManager().install_kernel_spec(str(spec_dir), kernel_name=name, user=user, prefix=prefix)
        except PermissionError as exc:
            raise BadInput(
                f"Cannot write the kernelspec ({exc.filename}): permission denied. Use "
                "--user (your home directory) or --sys-prefix (this environment)."
            ) from None


def _install(args: argparse.Namespace) -> int:
    prefix = sys.prefix if args.sys_prefix else args.prefix
    where = install(user=args.user, prefix=prefix, name=args.name)
    print(f"Installed kernelspec {args.name!r} ({DISPLAY_NAME}) in {where}")
    return 0


def _uninstall(args: argparse.Namespace) -> int:
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    manager = KernelSpecManager()
    try:
        path = manager.get_kernel_spec(args.name).resource_dir
    except NoSuchKernel:
        raise BadInput(f"No kernelspec named {args.name!r} is installed (see `jupyter kernelspec list`).") from None
    shutil.rmtree(path)
    print(f"Removed kernelspec {args.name!r} from {path}")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("kernel", help="Install the 'Python 3 (self-healing)' Jupyter kernel.")
    sub = parser.add_subparsers(dest="kernel_command", metavar="ACTION", required=True)
    inst = sub.add_parser("install", help="Install the kernelspec (jupyter kernelspec list shows it).")
    where = inst.add_mutually_exclusive_group()
    where.add_argument("--user", action="store_true", help="Install for the current user only.")
    where.add_argument("--sys-prefix", action="store_true", help="Install into this Python environment.")
    where.add_argument("--prefix", metavar="P", help="Install under the prefix P (P/share/jupyter/kernels).")
    inst.add_argument("--name", default=KERNEL_NAME, help=f"Kernelspec name (default {KERNEL_NAME}).")
    inst.set_defaults(handler=_install)
    rm = sub.add_parser("uninstall", help="Remove the kernelspec.")
    rm.add_argument("--name", default=KERNEL_NAME)
    rm.set_defaults(handler=_uninstall)

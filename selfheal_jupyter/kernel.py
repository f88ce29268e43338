"""The "Python 3 (self-healing)" kernel: ipykernel with selfheal_jupyter preloaded.

``python -m selfheal_jupyter.kernel -f {connection_file}`` is what the kernelspec
runs. It is the stock IPython kernel plus one always-loaded extension, so ``%%agent``
works in a fresh notebook without ``%load_ext``; user configuration stays intact.
"""

from __future__ import annotations

from ipykernel.kernelapp import IPKernelApp
from traitlets import List, Unicode

EXTENSION = "selfheal_jupyter"


class SelfHealKernelApp(IPKernelApp):
    """IPKernelApp whose always-loaded extensions include selfheal_jupyter."""

    name = "selfheal-kernel"
    default_extensions = List(Unicode(), ["storemagic", EXTENSION]).tag(config=False)


def main() -> None:  # pragma: no cover - runs as the kernel process
    SelfHealKernelApp.launch_instance()


if __name__ == "__main__":  # pragma: no cover
    main()

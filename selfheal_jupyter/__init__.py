"""selfheal-jupyter: a notebook cell that plans, writes, runs and repairs code.

``%load_ext selfheal_jupyter`` registers ``%%agent`` and friends.
"""

__version__ = "0.1.0"


def load_ipython_extension(ipython):  # pragma: no cover - exercised through IPython
    from .notebook.magics import load

    load(ipython)


def unload_ipython_extension(ipython):  # pragma: no cover
    from .notebook.magics import unload

    unload(ipython)

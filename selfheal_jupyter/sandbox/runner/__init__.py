"""The runner: the fork server that runs inside each sandbox container, as its PID 1.

The image ships this folder as ``/opt/selfheal/selfheal_runner/`` and starts it through
``__main__.py``. Standard library only; nothing of the host package is imported.
"""

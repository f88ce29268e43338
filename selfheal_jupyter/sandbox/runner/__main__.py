"""Start the runner: ``python3 -B /opt/selfheal/selfheal_runner/__main__.py [--memory-bytes N] [--control PATH]
[--nproc N] [--seal PATH]... [--await-host] [--hello-within S]``.

Started by its path, not with ``-m`` or ``-I``: the interpreter's flags and ``sys.path``
are then those of ``python3 FILE``, which every candidate must see. Python puts this
folder first on ``sys.path``; its parent takes that place, so the runner's modules load
only as ``<folder>.<module>`` (``selfheal_runner.server``...), never as top-level names
(``server``, ``codec``) a program's own imports could meet. The candidate then puts its
own directory at ``sys.path[0]``, as ``python3 FILE`` does.
"""

import importlib
import os
import sys

if __name__ == "__main__":
    _here = os.path.dirname(os.path.abspath(__file__))
    sys.path[0] = os.path.dirname(_here)
    importlib.import_module(f"{os.path.basename(_here)}.server").main()

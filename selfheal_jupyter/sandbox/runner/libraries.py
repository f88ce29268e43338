"""The libraries a run may use: the preload of the heavy template, matplotlib's
environment, and which template a request needs."""

import ast
import os
import shutil
import sys

from .layout import MPL_CACHE_DIR, MPL_CONFIG_DIR


def preload() -> list:
    """Import the common libraries once, so every run gets them for free."""
    loaded = []
    for name in ("numpy", "pandas"):
        try:
            __import__(name)
            loaded.append(name)
        except Exception:
            pass
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot

        loaded.append("matplotlib")
    except Exception:
        pass
    return loaded


def matplotlib_environment() -> None:
    """Agg, and a config directory holding the font cache made when the image was built
    (for both templates: a light run may import matplotlib itself)."""
    os.environ["MPLBACKEND"] = "Agg"
    os.environ["MPLCONFIGDIR"] = MPL_CONFIG_DIR
    if os.path.isdir(MPL_CACHE_DIR):
        shutil.copytree(MPL_CACHE_DIR, MPL_CONFIG_DIR, dirs_exist_ok=True)
    else:
        os.makedirs(MPL_CONFIG_DIR, exist_ok=True)


def needs_libraries(req: dict) -> bool:
    """Whether a run imports anything beyond the standard library (or loads inputs):
    then it starts from the template with numpy / pandas / matplotlib preloaded; else
    from the light one, whose processes fork and exit several times faster."""
    if req.get("inputs"):
        return True
    for key in ("prelude", "code", "tests"):
        try:
            tree = ast.parse(str(req.get(key) or ""))
        except (SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            else:
                continue
            if any(n.split(".")[0] not in sys.stdlib_module_names for n in names):
                return True
    return False

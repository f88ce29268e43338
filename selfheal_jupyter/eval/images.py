"""The sandbox image each benchmark's hidden tests need.

HumanEval and repair run in the default image (numpy is all they import). The
dataframe benchmark's tests import seaborn, scikit-learn, statsmodels... (its own
``data/requirements.txt``): those go into an image variant built with
``build_image(..., extra_requirements=...)`` under its own name, so that building it
never touches (or prunes) the default image.
"""

from __future__ import annotations

from collections.abc import Callable

from ..sandbox.image import DEFAULT_IMAGE

DATAFRAME_IMAGE = f"{DEFAULT_IMAGE}-dataframe"


def extra_requirements(benchmark: str) -> list[str]:
    if benchmark == "dataframe":
        from .dataframe import requirements

        return requirements()
    return []


def ensure_benchmark_image(
    benchmark: str,
    default: str = DEFAULT_IMAGE,
    *,
    build: bool = True,
    log: Callable[[str], None] = print,
) -> str:
    """The image ref to run ``benchmark`` in; builds the variant when asked and missing."""
    extras = extra_requirements(benchmark)
    if not extras:
        return default
    from ..sandbox.engine import connect
    from ..sandbox.image import build_image, ensure_image

    client = connect()
    try:
        if build:
            status = build_image(client, DATAFRAME_IMAGE, extra_requirements=extras, log=log)
            return status.ref
        return ensure_image(client, DATAFRAME_IMAGE, extra_requirements=extras)
    finally:
        client.close()

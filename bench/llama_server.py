"""Build llama.cpp's C++ ``llama-server`` from the sources llama-cpp-python vendors (cached).

The same llama.cpp version as the installed llama-cpp-python: its source
distribution is fetched with pip (``pip download --no-binary :all: --no-deps``),
unpacked, and ``vendor/llama.cpp`` is built with cmake (``-DLLAMA_BUILD_SERVER=ON
-DGGML_NATIVE=OFF``, so the binary does not depend on this CPU's extensions
beyond the AVX2-era defaults). About 10 minutes on 2 cores; the binary is kept
under ``bench/.cache/llama-server-<version>/`` and reused.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import llama_cpp

from jupyter_superfluid.engine.llama_sources import llama_cpp_tree

from .config import CACHE_DIR


def _run(cmd: list[str], cwd: Path | None = None) -> None:
    """Run a build step, echoing it; raise on failure."""
    print("+", " ".join(cmd), file=sys.stderr)
    subprocess.run(cmd, cwd=cwd, check=True)


def ensure_llama_server(version: str | None = None) -> Path:
    """The cached ``llama-server`` binary of llama-cpp-python ``version`` (default: installed)."""
    version = version or llama_cpp.__version__
    target = CACHE_DIR / f"llama-server-{version}" / "llama-server"
    if target.exists():
        return target
    src = llama_cpp_tree(version)
    build = CACHE_DIR / f"llama-server-{version}" / "build"
    _run(
        [
            *("cmake", "-S", str(src), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release"),
            *("-DLLAMA_BUILD_SERVER=ON", "-DGGML_NATIVE=OFF", "-DLLAMA_CURL=OFF"),
            *("-DBUILD_SHARED_LIBS=OFF", "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF"),
        ]
    )
    jobs = str(len(os.sched_getaffinity(0)))
    _run(["cmake", "--build", str(build), "--target", "llama-server", "-j", jobs])
    built = build / "bin" / "llama-server"
    if not built.exists():
        raise RuntimeError(f"the build did not produce {built}")
    shutil.copy2(built, target)
    return target

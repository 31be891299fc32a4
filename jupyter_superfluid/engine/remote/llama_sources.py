"""llama.cpp's sources, as the installed llama-cpp-python version vendors them (cached).

Building ``llama-server`` and reading llama.cpp's corpus of real chat templates
(``models/templates/*.jinja``) both need the llama.cpp tree that matches the installed
``llama-cpp-python``. It is not committed anywhere: its source distribution is fetched
with pip (``pip download --no-binary :all: --no-deps llama-cpp-python==VERSION``, which
only needs PyPI) and unpacked under a cache directory, once per version.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import tempfile
from importlib.metadata import version as installed_version
from pathlib import Path

from jupyter_superfluid.config import cache_root


def llama_cpp_python_version() -> str:
    """The installed llama-cpp-python version."""
    return installed_version("llama-cpp-python")


def sdist_root(version: str | None = None, cache: Path | None = None) -> Path:
    """The unpacked llama-cpp-python source distribution of ``version`` (default: installed)."""
    version = version or llama_cpp_python_version()
    into = (cache or cache_root()) / "sdist"
    root = into / f"llama_cpp_python-{version}"
    if (root / "vendor" / "llama.cpp").is_dir():
        return root
    into.mkdir(parents=True, exist_ok=True)
    archive = into / f"llama_cpp_python-{version}.tar.gz"
    if not archive.exists():
        _download(version, into)
    # Unpack beside the target and rename, so a half-unpacked tree is never taken as done.
    with tempfile.TemporaryDirectory(dir=into, prefix=".unpacking-") as tmp:
        with tarfile.open(archive) as tar:
            tar.extractall(tmp, filter="data")
        unpacked = Path(tmp) / root.name
        if not unpacked.is_dir():
            raise RuntimeError(f"{archive} does not hold {root.name}/")
        if not root.exists():
            os.replace(unpacked, root)
    return root


def llama_cpp_tree(version: str | None = None, cache: Path | None = None) -> Path:
    """The vendored ``llama.cpp`` source tree of llama-cpp-python ``version``."""
    return sdist_root(version, cache) / "vendor" / "llama.cpp"


def chat_templates(version: str | None = None, cache: Path | None = None) -> list[Path]:
    """llama.cpp's corpus of real chat templates (``models/templates/*.jinja``), sorted."""
    return sorted((llama_cpp_tree(version, cache) / "models" / "templates").glob("*.jinja"))


def _download(version: str, into: Path) -> None:
    """Fetch the sdist with pip into ``into`` (raises with pip's output on failure)."""
    cmd = [
        *(sys.executable, "-m", "pip", "download", "--no-binary", ":all:", "--no-deps"),
        *(f"llama-cpp-python=={version}", "-d", str(into), "-q"),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True)
    archive = into / f"llama_cpp_python-{version}.tar.gz"
    if done.returncode != 0 or not archive.exists():
        raise RuntimeError(
            f"pip could not download llama-cpp-python {version}'s source distribution:\n"
            + (done.stderr or done.stdout)[-2000:]
        )

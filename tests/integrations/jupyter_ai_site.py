"""The ``jupyter-ai`` extra, installed once into a cached folder beside (not into) the venv.

Jupyter AI's ``jupyterlab-chat`` brings a front-end that would clash with this project's
own chat panel (built on ``@jupyter/chat`` 0.20) in the browser tests, so the extra is
never installed into the test virtualenv. Instead ``ensure_jupyter_ai_site`` installs
it with ``pip install --target`` into ``<cache_root>/jupyter-ai-site-<version>``: only the
packages the venv lacks (what ``pip install --dry-run --report`` against the venv would
add), pinned and without their dependencies, so nothing there shadows the venv's own
``jupyter_server`` or ``pydantic``. The tests run the persona in a subprocess of the
venv's Python with ``PYTHONPATH`` at that folder (``site_env``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, TextIO

import tomllib

from jupyter_superfluid.config import cache_root

PERSONA_MANAGER_VERSION = "0.3.0"
REQUIREMENTS = (
    f"jupyter-ai-persona-manager=={PERSONA_MANAGER_VERSION}",
    "jupyterlab-chat==0.25.3",
    "jupyter-ai-router",
)
DONE = ".installed"
ENTRY_GROUP = "jupyter_ai.personas"
ROOT = Path(__file__).resolve().parents[2]


def jupyter_ai_site(cache: Path | None = None) -> Path:
    """The cached folder holding the extra's packages."""
    return (cache or cache_root()) / f"jupyter-ai-site-{PERSONA_MANAGER_VERSION}"


def site_built(cache: Path | None = None) -> bool:
    """Whether the folder was installed completely."""
    return (jupyter_ai_site(cache) / DONE).exists()


def _pip(*args: str, output: TextIO | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m pip`` of the test venv, its output captured or shown."""
    cmd = [sys.executable, "-m", "pip", "--disable-pip-version-check", *args]
    if output is None:
        return subprocess.run(cmd, capture_output=True, text=True, check=True)
    return subprocess.run(cmd, stdout=output, stderr=output, text=True, check=True)


def missing_packages() -> list[str]:
    """``name==version`` of what installing the extra into the venv would add."""
    done = _pip("install", "--dry-run", "--quiet", "--report", "-", *REQUIREMENTS)
    report = json.loads(done.stdout)
    return [
        f"{item['metadata']['name']}=={item['metadata']['version']}"
        for item in report.get("install", [])
    ]


def ensure_jupyter_ai_site(output: TextIO | None = None, cache: Path | None = None) -> Path:
    """Install the folder now if it is missing (pip's output to ``output``); the folder."""
    site = jupyter_ai_site(cache)
    if site_built(cache):
        return site
    packages = missing_packages()
    partial = site.with_name(site.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    _pip("install", "--no-deps", "--no-compile", "--target", str(partial), *packages, output=output)
    (partial / DONE).write_text("\n".join(packages) + "\n")
    shutil.rmtree(site, ignore_errors=True)
    partial.rename(site)
    return site


def site_env(cache: Path | None = None) -> dict[str, str]:
    """This process's environment with the folder first on ``PYTHONPATH``."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(jupyter_ai_site(cache)), env.get("PYTHONPATH", "")) if p
    )
    return env


def pyproject() -> dict[str, Any]:
    """This repository's ``pyproject.toml``."""
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def persona_entry_points(folder: Path) -> Path:
    """A folder for ``PYTHONPATH`` with a dist-info declaring pyproject's persona entry
    point (an editable install may predate it)."""
    declared = pyproject()["project"]["entry-points"][ENTRY_GROUP]
    dist = folder / "eps" / "superfluid_persona_entry-0.0.dist-info"
    if not dist.is_dir():
        dist.mkdir(parents=True)
        (dist / "METADATA").write_text(
            "Metadata-Version: 2.1\nName: superfluid-persona-entry\nVersion: 0.0\n"
        )
        lines = [f"[{ENTRY_GROUP}]", *(f"{name} = {value}" for name, value in declared.items())]
        (dist / "entry_points.txt").write_text("\n".join(lines) + "\n")
    return dist.parent


def jupyter_env(folder: Path, cache: Path | None = None) -> dict[str, str]:
    """What a ``jupyter lab`` needs to run Jupyter AI from the folder: its packages and
    the persona's entry point on ``PYTHONPATH``, its front-ends (``JUPYTER_PATH``) and
    the configs enabling its server extensions (``JUPYTER_CONFIG_PATH``)."""
    site = jupyter_ai_site(cache)
    return {
        "PYTHONPATH": os.pathsep.join((str(persona_entry_points(folder)), str(site))),
        "JUPYTER_PATH": str(site / "share" / "jupyter"),
        "JUPYTER_CONFIG_PATH": str(site / "etc" / "jupyter"),
    }

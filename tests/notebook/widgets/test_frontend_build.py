"""The front-end build: wiring in pyproject and package.json, and the installed extension."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import tomllib

import jupyter_superfluid

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = json.loads((ROOT / "labextension/package.json").read_text())


def test_package_json_declares_a_prebuilt_widget_extension():
    lab = PACKAGE["jupyterlab"]
    assert PACKAGE["version"] == jupyter_superfluid.__version__
    assert lab["extension"] is True and lab["outputDir"] == "../jupyter_superfluid/labextension"
    assert lab["sharedPackages"]["@jupyter-widgets/base"] == {"bundled": False, "singleton": True}
    assert PACKAGE["dependencies"]["@jupyter-widgets/base"].startswith("^6")
    assert "@jupyterlab/core-meta" in PACKAGE["devDependencies"]
    assert "vitest run" in PACKAGE["scripts"]["test"]
    for script in ("build", "build:prod"):  # the unit tests run in every build
        assert "npm run test" in PACKAGE["scripts"][script]
    assert jupyter_superfluid._jupyter_labextension_paths() == [
        {"src": "labextension", "dest": PACKAGE["name"]}
    ]


def test_pyproject_builds_and_ships_the_extension():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "hatch-jupyter-builder>=0.9" in project["build-system"]["requires"]
    hook = project["tool"]["hatch"]["build"]["hooks"]["jupyter-builder"]
    assert hook["build-function"] == "hatch_jupyter_builder.npm_builder"
    assert "jupyter_superfluid/labextension/package.json" in hook["ensured-targets"]
    kwargs = {"path": "labextension", "build_cmd": "build:prod", "npm": ["npm"]}
    assert hook["build-kwargs"] == kwargs
    shared = project["tool"]["hatch"]["build"]["targets"]["wheel"]["shared-data"]
    dest = "share/jupyter/labextensions/jupyter-superfluid"
    assert shared["jupyter_superfluid/labextension"] == dest
    ignored = (ROOT / ".gitignore").read_text().split()
    built = ("jupyter_superfluid/labextension/", "labextension/node_modules/", "labextension/lib/")
    assert set(built) <= set(ignored)


def test_the_installed_extension_is_enabled_and_matches_the_package():
    installed = Path(sys.prefix) / "share/jupyter/labextensions/jupyter-superfluid"
    meta = json.loads((installed / "package.json").read_text())
    assert meta["version"] == jupyter_superfluid.__version__
    assert (installed / "static" / Path(meta["jupyterlab"]["_build"]["load"]).name).exists()
    jupyter = Path(sys.executable).with_name("jupyter")
    listed = subprocess.run(
        [str(jupyter), "labextension", "list"], capture_output=True, text=True, check=True
    )
    plain = re.sub(r"\x1b\[[0-9;]*m", "", listed.stdout + listed.stderr)
    assert f"jupyter-superfluid v{jupyter_superfluid.__version__} enabled OK" in plain

"""Project-wide checks: the docs' config table, import layers, ruff, ruff format and mypy."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from jupyter_superfluid.config import CLI_ALIASES, Superfluid
from tools.doc_tables import CONFIG_PAGE, END, START, between, config_table

ROOT = Path(__file__).parents[2]
README = ROOT / "README.md"
SOURCES = ["jupyter_superfluid", "tests", "bench"]


def test_docs_config_table_matches_the_traits():
    table = between(CONFIG_PAGE.read_text(), START, END)
    assert table == config_table(), "run: python -m tools.doc_tables"


def test_every_trait_has_help_and_every_flag_a_trait():
    traits = Superfluid.class_traits(config=True)
    assert all(t.help for t in traits.values())
    for flag, target in CLI_ALIASES.items():
        assert target.split(".", 1)[1] in traits, flag


def test_readme_test_command_is_what_ci_runs():
    ci = (Path(__file__).parents[2] / ".ci" / "run").read_text()
    command = re.search(
        r"```bash\n(python3 -m venv .venv && .venv/bin/pip install -e .*)\n```", README.read_text()
    ).group(1)
    steps = [
        line
        for line in ci.splitlines()
        if line.strip() and not line.startswith(("#", "set ", "cd "))
    ]
    assert steps == [command], "CI runs the README's test command and nothing else"


def _tool(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run a tool of this environment from the repository root."""
    exe = Path(sys.executable).with_name(name)
    return subprocess.run([str(exe), *args], capture_output=True, text=True, cwd=ROOT)


def test_import_contracts_hold():
    """ARCHITECTURE.md's layers and no import cycles, checked by import-linter (pyproject.toml)."""
    out = _tool("lint-imports")
    assert out.returncode == 0, out.stdout[-3000:]


@pytest.mark.parametrize(
    "command",
    [("ruff", "check", *SOURCES), ("ruff", "format", "--check", *SOURCES), ("mypy",)],
    ids=["ruff-check", "ruff-format", "mypy"],
)
def test_code_is_lint_format_and_type_clean(command):
    """ruff, ruff format and mypy (settings in pyproject.toml) are clean."""
    out = _tool(*command)
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]

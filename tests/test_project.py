"""Project-wide checks: the README config table matches the traits, import layers hold."""

from __future__ import annotations

import re
from pathlib import Path

from jupyter_superfluid.config import CLI_ALIASES, Superfluid
from jupyter_superfluid.docs import END, START, config_table

README = Path(__file__).parents[1] / "README.md"


def test_readme_config_table_matches_the_traits():
    text = README.read_text()
    table = text[text.index(START) + len(START) : text.index(END)].strip()
    assert table == config_table(), "run: python -m jupyter_superfluid.docs README.md"


def test_every_trait_has_help_and_every_flag_a_trait():
    traits = Superfluid.class_traits(config=True)
    assert all(t.help for t in traits.values())
    for flag, target in CLI_ALIASES.items():
        assert target.split(".", 1)[1] in traits, flag


def test_readme_test_command_is_what_ci_runs():
    ci = (Path(__file__).parents[1] / ".ci" / "run").read_text()
    command = re.search(
        r"```bash\n(python3 -m venv .venv && .venv/bin/pip install -e .*)\n```", README.read_text()
    ).group(1)
    assert command.split(" && ")[0] in ci and "pip install" in ci and "pytest" in ci


def test_import_contracts_hold():
    """DESIGN's layering, checked by import-linter (contracts in pyproject.toml)."""
    import subprocess
    import sys

    lint = Path(sys.executable).with_name("lint-imports")
    out = subprocess.run([str(lint)], capture_output=True, text=True, cwd=Path(__file__).parents[1])
    assert out.returncode == 0, out.stdout[-3000:]

"""ARCHITECTURE.md stays true: every path it names exists, every import contract is described."""

from __future__ import annotations

import re

from tests.docs.markdown_blocks import ROOT

ARCHITECTURE = ROOT / "ARCHITECTURE.md"
PACKAGE = ROOT / "jupyter_superfluid"
# A repository path: no scheme, no leading slash or ~, no placeholders.
PATH = re.compile(r"[\w.-]+(?:/[\w.-]*)*")


def _named(text: str) -> list[str]:
    """Everything in backticks."""
    return re.findall(r"`([^`\n]+)`", text)


def _exists(name: str) -> bool:
    """A path from the repository root, or from inside the package."""
    return (ROOT / name).exists() or (PACKAGE / name).exists()


def test_every_path_in_architecture_exists() -> None:
    paths = [
        n
        for n in _named(ARCHITECTURE.read_text())
        if PATH.fullmatch(n) and ("/" in n or n.endswith(".py"))
    ]
    assert len(paths) > 50, "the path pattern stopped matching"
    missing = sorted({p for p in paths if not _exists(p)})
    assert not missing, f"ARCHITECTURE.md names paths that do not exist: {missing}"


def test_every_import_contract_is_described() -> None:
    pyproject = (ROOT / "pyproject.toml").read_text()
    contracts = len(re.findall(r"^\[\[tool\.importlinter\.contracts\]\]", pyproject, flags=re.M))
    described = len(re.findall(r"^\*\*\d+\. ", ARCHITECTURE.read_text(), flags=re.M))
    assert described == contracts, "ARCHITECTURE.md describes each import-linter contract"

"""The fenced code blocks of the docs and the README, with how each is checked.

A block is marked to run by an HTML comment on the line before its fence, which MyST
and GitHub both hide: ``<!-- run -->`` runs it as it is (self-contained), and
``<!-- run: server -->`` runs it against a live standalone server on the tiny models
(``SUPERFLUID_BASE_URL`` points there, and ``http://127.0.0.1:8453`` in the code is that
server). Every other ``python`` block is compiled, and every ``ipython`` block compiled
after IPython's own transformations (magics).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
FENCE = re.compile(r"^(`{3,})([^\s`]*)[^`]*$")
MARK = re.compile(r"^<!--\s*run(?::\s*(\w+))?\s*-->$")


@dataclass(frozen=True)
class Block:
    """One fenced code block."""

    path: Path
    line: int  # of the opening fence, 1-based
    lang: str
    source: str
    run: str | None  # None: not run; "": self-contained; "server": against a server

    @property
    def name(self) -> str:
        """``docs/page.md:LINE``, for test ids and tracebacks."""
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def markdown_files() -> list[Path]:
    """Every page of the docs, and the README."""
    return [*sorted(DOCS.rglob("*.md")), ROOT / "README.md"]


def blocks(path: Path) -> list[Block]:
    """The fenced code blocks of one Markdown file, in order."""
    found: list[Block] = []
    lines = path.read_text().splitlines()
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        fence, lang = opening.groups()
        end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == fence)
        before = next((lines[j].strip() for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        mark = MARK.match(before)
        run = (mark.group(1) or "") if mark else None
        found.append(Block(path, i + 1, lang, "\n".join(lines[i + 1 : end]) + "\n", run))
        i = end + 1
    return found


def all_blocks(*langs: str) -> list[Block]:
    """The blocks of every docs page and the README in these languages."""
    return [b for p in markdown_files() for b in blocks(p) if b.lang in langs]

"""Layouts: literal text with holes, made from a render, filled back, and matched in output.

Matching is lenient about whitespace where the layout has some (a model may write
``</parameter>`` where the template renders ``\\n</parameter>\\n``) and exact elsewhere.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache

from jupyter_superfluid.chat.syntax.model import Hole, Layout


def cut(text: str, needles: Mapping[Hole, str]) -> Layout:
    """``text`` as a layout: every occurrence of a needle replaced by its hole."""
    ordered = sorted(((n, h) for h, n in needles.items() if n), key=lambda p: -len(p[0]))
    pieces: list[str | Hole] = [text]
    for needle, hole in ordered:
        out: list[str | Hole] = []
        for piece in pieces:
            if isinstance(piece, Hole):
                out.append(piece)
                continue
            parts = piece.split(needle)
            for i, part in enumerate(parts):
                if i:
                    out.append(hole)
                out.append(part)
        pieces = out
    return tuple(p for p in pieces if p != "")


def fill(layout: Layout, values: Mapping[Hole, str]) -> str:
    """The text of a layout with its holes filled."""
    return "".join(values[p] if isinstance(p, Hole) else p for p in layout)


def holes(layout: Layout) -> list[Hole]:
    """The holes of a layout in order."""
    return [p for p in layout if isinstance(p, Hole)]


def literal_after(layout: Layout, index: int) -> str:
    """The literal right after position ``index`` ("" when a hole or the end follows)."""
    if index + 1 < len(layout):
        nxt = layout[index + 1]
        return nxt if isinstance(nxt, str) else ""
    return ""


@lru_cache(maxsize=4096)
def literal_pattern(literal: str) -> re.Pattern[str]:
    """A pattern for ``literal``: its whitespace runs match any (or no) whitespace."""
    parts = re.split(r"(\s+)", literal)
    body = "".join(r"\s*" if p.isspace() else re.escape(p) for p in parts if p)
    return re.compile(body)


def match_literal(literal: str, text: str, pos: int) -> int | None:
    """End of ``literal`` matched at ``pos`` (leading whitespace lenient), or None."""
    if not literal:
        return pos
    found = literal_pattern(literal).match(text, pos)
    if found is None and not literal[0].isspace():
        found = literal_pattern(" " + literal).match(text, pos)
    return found.end() if found else None


def find_literal(literal: str, text: str, pos: int) -> tuple[int, int] | None:
    """(start, end) of the first match of ``literal`` at or after ``pos``, or None."""
    if literal.isspace():
        found = re.compile(r"\s+").search(text, pos)
        return (found.start(), found.end()) if found else None
    found = literal_pattern(literal.strip()).search(text, pos)
    if found is None:
        return None
    # Whitespace before the literal belongs to the layout, not to the value read before it.
    start, end = found.start(), found.end()
    if literal != literal.lstrip():
        while start > pos and text[start - 1].isspace():
            start -= 1
    if literal != literal.rstrip():
        while end < len(text) and text[end].isspace():
            end += 1
    return start, end

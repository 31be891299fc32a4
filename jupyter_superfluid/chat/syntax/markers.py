"""Markers: the special-token-like pieces of rendered chat text, and diffs that respect them.

Real chat templates frame turns, reasoning and tool calls with markers that are single
special tokens in the model's vocabulary (``<|im_start|>``, ``[TOOL_CALLS]``, DeepSeek's
``<\uff5ctool\u2581sep\uff5c>``, ``<|turn>``) or XML-like tags (``<tool_call>``, ``<function=x>``).
Comparing two renders character by character can cut such a marker in half
(``<|im_end|>`` and ``<|im_start|>`` share ``<|im_``); these helpers compare renders as
sequences of markers and single characters instead.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

# Shapes of marker in llama.cpp's corpus of chat templates; the first four are the
# shapes real vocabularies hold as special tokens, the XML-like tag is often one too.
_SPECIAL = (
    r"<\|(?:open|close)\|>[^<>\n]{1,80}?<\|sep\|>"  # Kimi K3: <|open|>tools<|sep|>
    r"|<\|[^\s<>|]{1,48}\|>"  # <|im_start|>, <|tool_call:begin|>
    r"|<\uff5c[^<>\uff5c\s]{1,48}\uff5c>"  # DeepSeek's full-width bars, Hunyuan
    r"|<\|[\w\"]{1,24}>|<[\w\"]{1,24}\|>"  # Gemma 4: <|turn>, <turn|>, <|"|>
    r"|\[/?[A-Z][A-Z_]{1,30}\]|\[BEGIN FINAL RESPONSE\]"  # [TOOL_CALLS], [/INST], Apriel
    r"|<SPECIAL_\d+>|\[e~\[|\]~b\]|\]~!b\[|\]<\]minimax\[>\["  # Nemotron, MiniMax
)
_TAG = r"</?[A-Za-z_][\w:.\-]{0,40}>"  # <tool_call>, </think>, <seed:eos>
_ATTR_TAG = (
    r"</?(?:\uff5c[^<>\uff5c\s]{1,24}\uff5c)?[A-Za-z_][\w:.\-]{0,40}"
    r"(?:=[^<>\n]{0,80}|\s[^<>\n]{0,120})>"
)
MARKER = re.compile(f"{_SPECIAL}|{_TAG}|{_ATTR_TAG}")
SPECIAL_TOKEN = re.compile(f"{_SPECIAL}|{_TAG}")
SPECIAL_SHAPE = re.compile(_SPECIAL)  # only the shapes vocabularies hold as special tokens


def segments(text: str) -> list[str]:
    """``text`` cut into markers and single characters."""
    out: list[str] = []
    at = 0
    for match in MARKER.finditer(text):
        out.extend(text[at : match.start()])
        out.append(match.group(0))
        at = match.end()
    out.extend(text[at:])
    return out


def is_marker(piece: str) -> bool:
    """Whether ``piece`` is one whole marker."""
    return len(piece) > 1 and MARKER.fullmatch(piece) is not None


def common_prefix(texts: Sequence[str]) -> str:
    """The longest common prefix of ``texts`` that does not end inside a marker."""
    if not texts:
        return ""
    cut = [segments(t) for t in texts]
    n = 0
    for column in zip(*cut, strict=False):
        if any(piece != column[0] for piece in column):
            break
        n += 1
    return "".join(cut[0][:n])


def common_suffix(texts: Sequence[str]) -> str:
    """The longest common suffix of ``texts`` that does not start inside a marker."""
    if not texts:
        return ""
    cut = [segments(t)[::-1] for t in texts]
    n = 0
    for column in zip(*cut, strict=False):
        if any(piece != column[0] for piece in column):
            break
        n += 1
    return "".join(cut[0][:n][::-1])


def diff(a: str, b: str) -> tuple[str, str, str, str]:
    """``(prefix, a_middle, b_middle, suffix)`` with ``a == prefix + a_middle + suffix``."""
    prefix = common_prefix([a, b])
    rest_a, rest_b = a[len(prefix) :], b[len(prefix) :]
    suffix = common_suffix([rest_a, rest_b])
    end_a, end_b = len(rest_a) - len(suffix), len(rest_b) - len(suffix)
    return prefix, rest_a[:end_a], rest_b[:end_b], suffix


def first_marker(text: str) -> str:
    """The first marker in ``text`` ("" when there is none)."""
    match = MARKER.search(text)
    return match.group(0) if match else ""


def last_marker(text: str) -> str:
    """The last marker in ``text`` ("" when there is none)."""
    found = [m.group(0) for m in MARKER.finditer(text)]
    return found[-1] if found else ""


def special_tokens(texts: Iterable[str]) -> list[str]:
    """The distinct special-token-like markers in ``texts`` (tags with attributes excluded)."""
    seen: dict[str, None] = {}
    for text in texts:
        for match in SPECIAL_TOKEN.finditer(text):
            seen.setdefault(match.group(0), None)
    return list(seen)


def overlap(text: str, markers: Sequence[str]) -> int:
    """Length of the longest suffix of ``text`` that is a proper prefix of a marker."""
    longest = max((len(m) for m in markers), default=1)
    at = max(0, len(text) - longest + 1)
    # Asked for every streamed token: only a suffix that starts with a marker's
    # first character can be one's prefix, so jump to those with ``find``.
    while True:
        starts = [i for m in markers if m and (i := text.find(m[0], at)) >= 0]
        if not starts:
            return 0
        at = min(starts)
        tail = text[at:]
        if any(m.startswith(tail) for m in markers):
            return len(tail)
        at += 1


def end_marker(end: str, user_close: str, prompt: str) -> str:
    """The marker that ends an assistant turn, given the text after its content (``end``):
    the first marker that also closes a user turn (``user_close``, the text after a user
    message), else the last one that does not also start a turn (stand in the generation
    prompt); "" when ``end`` holds none."""
    found = [m.group(0) for m in MARKER.finditer(end)]
    for marker in (m.group(0) for m in MARKER.finditer(user_close)):
        if marker in found:
            return marker
    for marker in reversed(found):
        if marker not in prompt:
            return marker
    return found[0] if found else ""

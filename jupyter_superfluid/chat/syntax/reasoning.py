"""The reasoning markers of a template, found from what it renders.

In order: an assistant turn rendered with reasoning (the text right before it opens,
the text right after closes); else the generation prompt when thinking is switched on
or off (``<think>\\n`` added, or an empty ``<think></think>`` block); else a turn whose
text holds ``<think>…</think>`` that the template strips from history. A marker found
alone gets its counterpart by name (``<think>``/``</think>``, ``[THINK]``/``[/THINK]``,
``<|START_THINKING|>``/``<|END_THINKING|>``) when the template's source holds it.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from jupyter_superfluid.chat.syntax import markers
from jupyter_superfluid.chat.syntax.model import ReasoningSyntax

REASONING = "sfreasoningtext"
CONTENT = "sfanswertext"

# (reasoning, content, with a tool call) → the assistant turn's text, or None if refused
RenderReasoning = Callable[[str, str, bool], "str | None"]
# thinking on? → the generation prompt's text, or None
RenderPrompt = Callable[[bool], "str | None"]

_REASONING_WORDS = re.compile(r"think|reason|thought", re.IGNORECASE)
_STRIPPED = (("<think>", "</think>"), ("[THINK]", "[/THINK]"), ("<thinking>", "</thinking>"))


def derive(
    turn: RenderReasoning, prompt: RenderPrompt, header: str, source: str
) -> ReasoningSyntax | None:
    """The template's reasoning markers, or None if it shows no reasoning at all.

    ``header`` is the generation prompt: what comes before reasoning there is no marker.
    """
    finders = (_from_turn, _from_call_turn, _from_prompt, _from_stripped, _from_empty, _from_source)
    for find in finders:
        found = find(turn, prompt, header, source)
        if found is not None and (found.open or found.close):
            return found
    return None


def _from_turn(
    turn: RenderReasoning, prompt: RenderPrompt, header: str, source: str, call: bool = False
) -> ReasoningSyntax | None:
    text = turn(REASONING, CONTENT, call)
    if text is None or REASONING not in text or CONTENT not in text:
        return None
    before, _, rest = text.partition(REASONING)
    between = rest[: rest.find(CONTENT)]
    before = before[len(markers.common_prefix([before, header])) :]  # after the prompt
    opening = _marker_run(before, last=True)
    if opening and "\n" not in before.strip() and len(list(markers.MARKER.finditer(before))) == 1:
        opening = before.strip()  # a recipient header: muse-glimmer's " to=self<|message|>"
    elif opening:
        # Words after the marker open the reasoning too (Gemma 4: "<|channel>thought").
        tail = before[before.rindex(opening) :].strip()
        opening = tail if len(tail) < 2 * len(opening) + 16 and "\n" not in tail else opening
    closing = _marker_run(between, last=False)
    if not closing:
        return None
    gap = between[between.index(closing) + len(closing) :]
    found = _paired(opening, closing, source + header)
    return ReasoningSyntax(found.open, found.close, gap)


def _from_call_turn(
    turn: RenderReasoning, prompt: RenderPrompt, header: str, source: str
) -> ReasoningSyntax | None:
    """Some templates keep reasoning only on a turn that calls tools (Kimi K2 Thinking)."""
    found = _from_turn(turn, prompt, header, source, call=True)
    return ReasoningSyntax(found.open, found.close) if found else None


def _from_empty(
    turn: RenderReasoning, prompt: RenderPrompt, header: str, source: str
) -> ReasoningSyntax | None:
    """An empty pair of thinking markers the template renders (``<think></think>``)."""
    text = turn("", CONTENT, False) or ""
    for match in markers.MARKER.finditer(text[: text.find(CONTENT)]):
        opening = match.group(0)
        closing = _counterpart(opening, source)
        rest = text[match.end() :].lstrip()
        if _REASONING_WORDS.search(opening) and closing and rest.startswith(closing):
            return ReasoningSyntax(opening, closing)
    return None


def _from_prompt(
    turn: RenderReasoning, prompt: RenderPrompt, header: str, source: str
) -> ReasoningSyntax | None:
    on, off = prompt(True), prompt(False)
    if on is None or off is None or on == off:
        return _from_open_prompt(on, source) if on is not None else None
    _, in_on, in_off, _ = markers.diff(on, off)
    if in_on.strip() and not in_off.strip() and on.rstrip().endswith(in_on.strip()):
        return _paired(_marker_run(in_on, last=True), "", source)
    if in_off.strip() and not in_on.strip():
        found = list(markers.MARKER.finditer(in_off))
        if len(found) >= 2:
            # The empty block's opening runs up to its closing marker: Gemma 4 opens with
            # "<|channel>thought" and closes with "<channel|>".
            start, last = found[0].start(), found[-1]
            return ReasoningSyntax(in_off[start : last.start()].strip(), last.group(0))
        if len(found) == 1:
            return _paired("", found[0].group(0), source)
    return _from_open_prompt(on, source)


def _from_open_prompt(on: str | None, source: str) -> ReasoningSyntax | None:
    """A generation prompt that ends in a marker named for thinking, whose closing
    counterpart the source holds (``<think>`` … ``</think>``)."""
    if on is None:
        return None
    tail = markers.last_marker(on)
    if (
        tail
        and _REASONING_WORDS.search(tail)
        and on.rstrip().endswith(tail)
        and _counterpart(tail, source)
    ):
        return _paired(tail, "", source)
    return None


def _from_stripped(
    turn: RenderReasoning, prompt: RenderPrompt, header: str, source: str
) -> ReasoningSyntax | None:
    for opening, closing in _STRIPPED:
        if closing not in source:
            continue
        text = turn("", f"{opening}{REASONING}{closing}{CONTENT}", False)
        if text is not None and CONTENT in text and REASONING not in text:
            return ReasoningSyntax(opening, closing)
    return None


def _marker_run(text: str, *, last: bool) -> str:
    """The last (or first) marker of ``text``."""
    found = list(markers.MARKER.finditer(text))
    if not found:
        return ""
    return (found[-1] if last else found[0]).group(0)


def _counterpart(marker: str, source: str) -> str:
    """The closing marker named like ``marker`` that the template's source holds ("" if none)."""
    for candidate in _counterparts(marker):
        if candidate != marker and candidate in source:
            return candidate
    return ""


def _counterparts(marker: str) -> list[str]:
    out = []
    if marker.startswith("<") and not marker.startswith("</"):
        out.append("</" + marker[1:])
    if marker.startswith("</"):
        out.append("<" + marker[2:])
    if marker.startswith("[") and not marker.startswith("[/"):
        out.append("[/" + marker[1:])
    if marker.startswith("[/"):
        out.append("[" + marker[2:])
    pairs = (
        ("START", "END"),
        ("BEGIN", "END"),
        ("begin", "end"),
        ("start", "end"),
        ("open", "close"),
    )
    for a, b in pairs:
        if a in marker:
            out.append(marker.replace(a, b))
        if b in marker:
            out.append(marker.replace(b, a))
    return out


def _paired(opening: str, closing: str, source: str) -> ReasoningSyntax:
    """Markers with a missing one filled in by name where the source holds it."""
    if opening and not closing:
        closing = _counterpart(opening, source)
    if closing and not opening:
        opening = _counterpart(closing, source)
    return ReasoningSyntax(opening.strip(), closing.strip())


def _from_source(
    turn: RenderReasoning, prompt: RenderPrompt, header: str, source: str
) -> ReasoningSyntax | None:
    """A pair of thinking markers the template writes in some branch or names in its
    instructions (Ministral 3 writes ``[THINK]`` … ``[/THINK]`` from content blocks;
    Granite 3.3 asks for thoughts "between <think></think>")."""
    for match in markers.MARKER.finditer(source):
        opening = match.group(0)
        if opening.startswith(("</", "[/")) or not _REASONING_WORDS.search(opening):
            continue
        closing = _counterpart(opening, source)
        if closing:
            return ReasoningSyntax(opening, closing)
    return None

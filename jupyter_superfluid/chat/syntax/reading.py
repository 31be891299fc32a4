"""Reading tool calls back from model output with a call syntax.

A section is read piece by piece along the call's layout: literals matched (leniently
about whitespace), the name and the id read up to the literal that follows them, the
arguments by their own syntax. A call written as one JSON object is also read as JSON
(any key order or spacing) when the layout does not match.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jupyter_superfluid.chat.syntax import arguments as args_syntax
from jupyter_superfluid.chat.syntax.layout import find_literal, match_literal
from jupyter_superfluid.chat.syntax.model import CallSyntax, Hole, JsonCall, TaggedArguments
from jupyter_superfluid.chat.types import ToolSpec


@dataclass(frozen=True)
class ReadCall:
    """One call as the model wrote it."""

    name: str
    arguments: dict[str, Any]
    call_id: str | None = None


def read_section(
    syntax: CallSyntax, text: str, pos: int, tools: Mapping[str, ToolSpec], *, final: bool
) -> tuple[list[ReadCall], int] | None:
    """The calls of a section starting at ``pos`` and where it ends, or None if incomplete.

    ``final``: the output has ended, so a missing section close is forgiven.
    """
    at = match_literal(syntax.section_open, text, pos)
    if at is None:
        return None
    calls: list[ReadCall] = []
    while True:
        found = read_call(syntax, text, at, tools, final=final)
        if found is None:
            break
        calls.append(found[0])
        at = found[1]
        if not syntax.parallel:
            break
        nxt = match_literal(syntax.sep, text, at)
        if nxt is None or (syntax.sep.strip() and read_call(syntax, text, nxt, tools) is None):
            break
        at = nxt
    if not calls:
        return None
    close = match_literal(syntax.section_close, text, at)
    if close is None:
        return (calls, at) if final else None
    return calls, close


def read_call(
    syntax: CallSyntax,
    text: str,
    pos: int,
    tools: Mapping[str, ToolSpec],
    *,
    final: bool = False,
) -> tuple[ReadCall, int] | None:
    """One call at ``pos`` and where it ends, or None (``final``: the output has ended,
    so the call's closing literal may be missing)."""
    found = _read_layout(syntax, text, pos, tools, final)
    if found is None and syntax.json_call is not None:
        found = _read_json(syntax, syntax.json_call, text, pos, final)
    return found


def _cut_short(literal: str, text: str, at: int, final: bool) -> int | None:
    """At the end of output, a closing literal the model did not finish counts as there."""
    rest = text[at:].strip()
    if final and literal.strip().startswith(rest):
        return len(text)
    return None


def _read_layout(
    syntax: CallSyntax, text: str, pos: int, tools: Mapping[str, ToolSpec], final: bool
) -> tuple[ReadCall, int] | None:
    name: str | None = None
    call_id: str | None = None
    arguments: dict[str, Any] | None = None
    at: int | None = pos
    layout = syntax.call
    for i, part in enumerate(layout):
        if at is None:
            return None
        if isinstance(part, str):
            matched = match_literal(part, text, at)
            if matched is None and i == len(layout) - 1:
                matched = _cut_short(part, text, at, final)
            at = matched
            continue
        if part is Hole.ARGS:
            spec = tools.get(name or "")
            until = _literal_after(layout, i)
            got = args_syntax.read(
                syntax.arguments, text, at, until, spec.parameters if spec else None
            )
            if got is None:
                return None
            arguments, at = got
            continue
        read = _read_hole(syntax, part, text, at, _followers(syntax, i))
        if read is None:
            return None
        value, at = read
        if part is Hole.NAME:
            if name is not None and value != name:
                return None
            name = value
        elif part is Hole.ID:
            call_id = value
    if at is None or not name or arguments is None:
        return None
    return ReadCall(name, arguments, call_id), at


def _read_hole(
    syntax: CallSyntax, hole: Hole, text: str, pos: int, followers: list[str]
) -> tuple[str, int] | None:
    if hole is Hole.INDEX:
        found = re.compile(r"\s*\d{1,4}").match(text, pos)
        return (found.group(0).strip(), found.end()) if found else None
    best: tuple[int, int] | None = None
    for literal in followers:
        hit = find_literal(literal, text, pos)
        if hit is not None and (best is None or hit[0] < best[0]):
            best = hit
    if best is None:
        return None
    value = text[pos : best[0]].strip()
    pattern = syntax.id_pattern if hole is Hole.ID else r"[^\s<>\[\]{}()\"',]{1,128}"
    if not re.fullmatch(pattern, value):
        return None
    return value, best[0]


def _literal_after(layout: tuple[str | Hole, ...], i: int) -> str:
    nxt = layout[i + 1] if i + 1 < len(layout) else ""
    return nxt if isinstance(nxt, str) else ""


def _followers(syntax: CallSyntax, i: int) -> list[str]:
    """The literals that may come right after the hole at ``i`` of the call layout."""
    layout = syntax.call
    nxt = layout[i + 1] if i + 1 < len(layout) else None
    if isinstance(nxt, str):
        return [nxt]
    if nxt is Hole.ARGS:
        starts = _argument_starts(syntax)
        return [*starts, *_followers(syntax, i + 1)]
    if nxt is None:
        return [lit for lit in (syntax.sep, syntax.section_close) if lit.strip()]
    return []


def _argument_starts(syntax: CallSyntax) -> list[str]:
    """Literals arguments may start with."""
    args = syntax.arguments
    if not isinstance(args, TaggedArguments):
        return ["{", '"']
    starts = [args.open, args.empty]
    for _, layout in args.layouts:
        if layout and isinstance(layout[0], str):
            starts.append(layout[0])
    return [s for s in dict.fromkeys(starts) if s.strip()]


def _read_json(
    syntax: CallSyntax, fields: JsonCall, text: str, pos: int, final: bool
) -> tuple[ReadCall, int] | None:
    first, last = syntax.call[0], syntax.call[-1]
    if not isinstance(first, str) or "{" not in first:
        return None
    at = match_literal(first[: first.index("{")], text, pos)
    if at is None:
        return None
    while at < len(text) and text[at].isspace():
        at += 1
    try:
        value, end = json.JSONDecoder().raw_decode(text, at)
    except json.JSONDecodeError:
        return None
    if not isinstance(value, dict):
        return None
    found = _fields(value, fields)
    if found is None:
        return None
    after = last.split("}", 1)[1] if isinstance(last, str) and "}" in last else ""
    close = match_literal(after, text, end)
    if close is None:
        close = _cut_short(after, text, end, final)
    return (found, close) if close is not None else None


def _fields(value: dict[str, Any], fields: JsonCall) -> ReadCall | None:
    if not fields.name:
        if len(value) != 1:
            return None
        name, arguments = next(iter(value.items()))
        return ReadCall(name, arguments) if isinstance(arguments, dict) else None
    name = _at(value, fields.name)
    arguments = _at(value, fields.arguments)
    if fields.arguments_as_string and isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            return None
    if arguments is None:
        arguments = {}
    if not isinstance(name, str) or not isinstance(arguments, dict):
        return None
    call_id = _at(value, fields.id) if fields.id else None
    return ReadCall(name, arguments, call_id if isinstance(call_id, str) else None)


def _at(value: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def partial_call(calls: CallSyntax, text: str) -> tuple[str, str]:
    """Best-effort (name, raw arguments text) from a call the token cap cut short."""
    if calls.json_call is not None and '"' in text:
        return _partial_json_call(text)
    first_literal = next((p for p in calls.call if isinstance(p, str)), "")
    rest = text[len(calls.section_open) :] if text.startswith(calls.section_open) else text
    rest = rest[len(first_literal) :] if rest.startswith(first_literal) else rest
    if Hole.NAME not in calls.call:
        return "", rest
    follow = calls.call[calls.call.index(Hole.NAME) + 1 :]
    stop = next((p for p in follow if isinstance(p, str) and p.strip()), "")
    if stop and stop.strip() in rest:
        name, _, args = rest.partition(stop.strip())
        return name.strip(), args.strip()
    return "", rest


def _partial_json_call(body: str) -> tuple[str, str]:
    name = ""
    at = body.find('"name"')
    if at >= 0 and ":" in body[at:]:
        try:
            found, _ = json.JSONDecoder().raw_decode(body[body.index(":", at) + 1 :].lstrip())
            name = found if isinstance(found, str) else ""
        except (ValueError, json.JSONDecodeError):
            name = ""
    for key in ('"arguments"', '"parameters"'):
        at = body.find(key)
        if at >= 0 and ":" in body[at:]:
            return name, body[body.index(":", at) + 1 :].strip()
    return name, ""

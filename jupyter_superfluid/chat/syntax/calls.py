"""The tool-call syntax of a template, derived from its own renders of assistant turns.

Turns that differ in one thing are rendered: one call, the same call with other
arguments, two calls. The first call's text gives the call's layout (name, id, index and
arguments as holes); the two-call turn gives what lies between calls, and so what opens
and closes the section of calls; a turn with text only gives the turn's own frame (its
header and its end marker). The result is kept only if writing the probe calls with it
gives back exactly the template's own text for every probe turn.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from jupyter_superfluid.chat.syntax import arguments, markers
from jupyter_superfluid.chat.syntax.layout import cut, fill
from jupyter_superfluid.chat.syntax.model import (
    Arguments,
    CallSyntax,
    Hole,
    JsonArguments,
    JsonCall,
    Layout,
)
from jupyter_superfluid.chat.types import ToolCall

NAME_1, NAME_2 = "sfnameone", "sfnametwo"
ID_1, ID_2, ID_3 = "sfid1abcd", "sfid2efgh", "sfid3ijkl"
CONTENT = "sfcontent"

RenderTurn = Callable[[Sequence[ToolCall], str], "str | None"]  # (calls, content) → turn text
MapId = Callable[[str], str]  # a client's call id as the template writes it


@dataclass(frozen=True)
class TurnFrame:
    """A text-only assistant turn: what comes before its text and after it."""

    head: str
    end: str
    end_marker: str = ""  # the marker that ends the turn


def call(call_id: str, name: str, args: dict[str, Any]) -> ToolCall:
    """A probe call."""
    return ToolCall(call_id=call_id, name=name, arguments=json.dumps(args))


def frame(render: RenderTurn) -> TurnFrame | None:
    """The text before and after the content of a text-only turn."""
    text = render((), CONTENT)
    if text is None or CONTENT not in text:
        return None
    head, _, end = text.partition(CONTENT)
    return TurnFrame(head, end)


@dataclass(frozen=True)
class _Frame:
    """What a call turn shares with a text turn: its header and its closing text."""

    header: str  # before the section of calls
    end: str  # after it (the turn's end)
    text_end: str  # what the text turn has instead of the section's closing
    end_marker: str = ""  # the marker that ends a text turn


def derive(
    render: RenderTurn, map_id: MapId, end_marker: str, prompt: str = ""
) -> tuple[CallSyntax, str] | None:
    """(the call syntax, the text after calls), or None when it cannot be derived.

    ``end_marker`` is the marker that ends a text turn; ``prompt`` the generation prompt.
    """
    text_turn = frame(render)
    if text_turn is None:
        return None
    text_turn = TurnFrame(text_turn.head, text_turn.end, end_marker)
    args = arguments.derive(
        lambda a: render((call(ID_1, NAME_1, a),), ""),
    )
    if args is None:
        return None
    args_1 = {arguments.KEY_1: arguments.VALUE_1}
    args_2 = {arguments.KEY_1: arguments.VALUE_2}
    one = render((call(ID_1, NAME_1, args_1),), "")
    if one is None or NAME_1 not in one:
        return None
    two = render((call(ID_1, NAME_1, args_1), call(ID_2, NAME_2, args_2)), "")
    single: tuple[CallSyntax, str] | None = None
    for index_at in (None, *_digit_positions(one)):
        found = _derive_with(text_turn, args, one, two, map_id, index_at, prompt)
        if found is None or not _verifies(found[0], found[2], render, map_id):
            continue
        if found[0].parallel or two is None:
            return found[0], found[2].end
        single = single or (found[0], found[2].end)  # an index may tell the calls apart
    return single


def _digit_positions(text: str) -> list[int]:
    """Positions of lone digits 0 or 1 (a call's index, counted from 0 or 1)."""
    return [m.start() for m in re.finditer(r"(?<!\d)[01](?!\d)", text)]


def _derive_with(
    text_turn: TurnFrame,
    args: Arguments,
    one: str,
    two: str | None,
    map_id: MapId,
    index_at: int | None,
    prompt: str,
) -> tuple[CallSyntax, str, _Frame] | None:
    """The syntax if the lone digit at ``index_at`` (or none) is the call's index."""
    base = int(one[index_at]) if index_at is not None else 0
    cut_one = _one_call(one, args, map_id, index_at)
    if cut_one is None:
        return None
    core, lead_text, tail_text = cut_one
    turn, opening, closing = _frame_of(text_turn, lead_text, tail_text, prompt)
    values_1 = _values(args, map_id(ID_1), NAME_1, {arguments.KEY_1: arguments.VALUE_1}, base)
    values_2 = _values(args, map_id(ID_2), NAME_2, {arguments.KEY_1: arguments.VALUE_2}, base + 1)
    between = _between(two, turn, opening, closing, fill(core, values_1), fill(core, values_2))
    if between is None:
        return _single(core, args, opening, closing, turn, base, one)
    lead = markers.common_suffix([opening, between])
    tail = markers.common_prefix([closing, between[: len(between) - len(lead)]])
    section_close, call_end = _split_end(closing[len(tail) :], turn)
    syntax = CallSyntax(
        call=_clean((lead, *core, tail)),
        arguments=args,
        section_open=opening[: len(opening) - len(lead)],
        section_close=section_close,
        sep=between[len(tail) : len(between) - len(lead)],
        index_base=base,
        json_call=_json_call(one, NAME_1, map_id(ID_1)),
    )
    return syntax, call_end, _Frame(turn.header, call_end, turn.text_end, turn.end_marker)


def _one_call(
    one: str, args: Arguments, map_id: MapId, index_at: int | None
) -> tuple[Layout, str, str] | None:
    """(the call's core from its first hole to its last, the text before, the text after)."""
    marked = one if index_at is None else one[:index_at] + "\x00" + one[index_at + 1 :]
    written = arguments.encode(args, {arguments.KEY_1: arguments.VALUE_1})
    holes = {Hole.NAME: NAME_1, Hole.ID: map_id(ID_1), Hole.ARGS: written, Hole.INDEX: "\x00"}
    layout = cut(marked, holes)
    if Hole.ARGS not in layout or Hole.NAME not in layout:
        return None
    slots = [i for i, p in enumerate(layout) if isinstance(p, Hole)]
    lead_text = "".join(p for p in layout[: slots[0]] if isinstance(p, str))
    tail_text = "".join(p for p in layout[slots[-1] + 1 :] if isinstance(p, str))
    return layout[slots[0] : slots[-1] + 1], lead_text, tail_text


def _frame_of(
    text_turn: TurnFrame, lead_text: str, tail_text: str, prompt: str
) -> tuple[_Frame, str, str]:
    """What a call turn shares with a text turn, and its opening and closing text."""
    header = _to_marker(markers.common_prefix([text_turn.head, lead_text]), prompt)
    end = markers.common_suffix([text_turn.end, tail_text])
    text_end = text_turn.end[: len(text_turn.end) - len(end)]
    opening = lead_text[len(header) :]
    # What the text turn also has at the same place (Kimi K3's <|close|>response<|sep|>)
    # closes the text before the calls; the section starts after it.
    shared = markers.common_prefix([opening, text_end])
    if markers.MARKER.search(shared):
        header, opening = header + shared, opening[len(shared) :]
    closing = tail_text[: len(tail_text) - len(end)]
    return _Frame(header, end, text_end, text_turn.end_marker), opening, closing


def _single(
    core: Layout,
    args: Arguments,
    opening: str,
    closing: str,
    turn: _Frame,
    base: int,
    one: str,
) -> tuple[CallSyntax, str, _Frame]:
    """A template that writes one call per turn: the whole section is the call."""
    section_close, call_end = _split_end(closing, turn)
    syntax = CallSyntax(
        call=_clean((opening, *core, section_close)),
        arguments=args,
        parallel=False,
        index_base=base,
        json_call=_json_call(one, NAME_1, None),
    )
    return syntax, call_end, _Frame(turn.header, call_end, turn.text_end, turn.end_marker)


def _to_marker(header: str, prompt: str) -> str:
    """The header cut back to its last marker: text after it that the text turn shares
    with the call turn (functionary's ">>>" before "all" or a function's name) opens
    the section, unless the generation prompt already writes it."""
    pieces = markers.segments(header)
    keep = len(pieces)
    while keep and not markers.is_marker(pieces[keep - 1]) and not pieces[keep - 1].isspace():
        keep -= 1
    cut = "".join(pieces[keep:])
    return header if not cut or prompt.endswith(cut) else "".join(pieces[:keep])


def _split_end(closing: str, turn: _Frame) -> tuple[str, str]:
    """(section close, turn end after calls): a lone marker where the text turn has another
    lone marker is the calls' own end marker (``<|eom_id|>``), not a section close."""
    rest = closing.strip()
    instead = turn.text_end.strip()
    if markers.is_marker(rest) and instead == turn.end_marker and rest != instead:
        return closing[: closing.index(rest)], closing[closing.index(rest) :] + turn.end
    return closing, turn.end


def _between(
    two: str | None, turn: _Frame, opening: str, closing: str, first: str, second: str
) -> str | None:
    """The text between the first and second call's cores in the two-call turn."""
    if two is None:
        return None
    start = turn.header + opening + first
    finish = second + closing + turn.end
    if not two.startswith(start) or not two.endswith(finish) or len(start) + len(finish) > len(two):
        return None
    return two[len(start) : len(two) - len(finish)]


def _values(
    args: Arguments, call_id: str, name: str, values: dict[str, Any], index: int
) -> dict[Hole, str]:
    return {
        Hole.NAME: name,
        Hole.ID: call_id,
        Hole.ARGS: arguments.encode(args, values),
        Hole.INDEX: str(index),
    }


def _clean(layout: Layout) -> Layout:
    return tuple(p for p in layout if p != "")


def _json_call(text: str, name: str, call_id: str | None) -> JsonCall | None:
    """The key paths of a call written as one JSON object holding its name."""
    decoder = json.JSONDecoder()
    for at, char in enumerate(text):
        if char != "{":
            continue
        try:
            value, _ = decoder.raw_decode(text, at)
        except json.JSONDecodeError:
            continue
        if not isinstance(value, dict):
            continue
        if list(value) == [name]:
            return JsonCall(name=(), arguments=(name,))
        name_path = _path_of(value, name)
        if name_path is None:
            continue
        args_path = _path_of(value, {arguments.KEY_1: arguments.VALUE_1})
        as_string = False
        if args_path is None:
            args_path = _path_of(value, json.dumps({arguments.KEY_1: arguments.VALUE_1}))
            as_string = True
        if args_path is None:
            continue
        id_path = _path_of(value, call_id) if call_id else None
        return JsonCall(name_path, args_path, id_path, as_string)
    return None


def _path_of(value: Any, wanted: Any, path: tuple[str, ...] = ()) -> tuple[str, ...] | None:
    if value == wanted:
        return path
    if isinstance(value, dict):
        for key, inner in value.items():
            found = _path_of(inner, wanted, (*path, key))
            if found is not None:
                return found
    return None


# -- writing and checking ---------------------------------------------------------------


def write_section(syntax: CallSyntax, calls: Sequence[tuple[str, str, dict[str, Any]]]) -> str:
    """The section of ``calls`` ((written id, name, arguments) each) as the template writes it."""
    texts = [
        fill(syntax.call, _values(syntax.arguments, cid, name, args, syntax.index_base + i))
        for i, (cid, name, args) in enumerate(calls)
    ]
    return syntax.section_open + syntax.sep.join(texts) + syntax.section_close


def _verifies(syntax: CallSyntax, turn: _Frame, render: RenderTurn, map_id: MapId) -> bool:
    """Whether writing the probe calls with ``syntax`` gives the template's own turns."""
    probes: list[list[tuple[str, str, dict[str, Any]]]] = [
        [(ID_1, NAME_1, {arguments.KEY_1: "sfcheck", arguments.KEY_2: 7})],
        [(ID_3, NAME_2, {})],
    ]
    if syntax.parallel:
        probes.append([(ID_1, NAME_1, {"a": 1}), (ID_2, NAME_2, {"b": "x"}), (ID_3, NAME_1, {})])
    for calls in probes:
        text = render(tuple(call(i, n, a) for i, n, a in calls), "")
        written = [(map_id(i), n, a) for i, n, a in calls]
        if text != turn.header + write_section(syntax, written) + turn.end:
            return False
    return True


def is_json_arguments(syntax: CallSyntax) -> bool:
    """Whether the call's arguments are one JSON object."""
    return isinstance(syntax.arguments, JsonArguments)

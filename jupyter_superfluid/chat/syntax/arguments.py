"""A call's arguments: derived from renders, written out, and read back from model output.

Derivation renders one call with different arguments (none, one, two, one of each JSON
type) and finds how the template writes them: one JSON object, or tagged pieces
(``<parameter=city>Paris</parameter>``, ``<arg_key>city</arg_key><arg_value>…``,
``city='Paris'``). A candidate is kept only if writing the probe arguments with it gives
back exactly the template's own text.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from jupyter_superfluid.chat.syntax import markers, values
from jupyter_superfluid.chat.syntax.layout import cut, fill, find_literal, holes, match_literal
from jupyter_superfluid.chat.syntax.model import (
    Arguments,
    Hole,
    JsonArguments,
    JsonType,
    Layout,
    TaggedArguments,
    ValueNotation,
)

KEY_1, KEY_2 = "sfkeyone", "sfkeytwo"
VALUE_1, VALUE_2 = "sfvalueone", "sfvaluetwo"
# One sample per JSON type, distinctive enough to be found in a render.
_TYPE_SAMPLES: tuple[tuple[JsonType, Any], ...] = (
    ("number", 4217),
    ("boolean", True),
    ("object", {"sfinner": "sfdeep"}),
    ("array", ["sfitem", 5]),
    ("null", None),
)
_CHECKS = (
    {KEY_1: "sfcheck", KEY_2: 31},
    {KEY_2: False, KEY_1: [1, "x"]},
    {"sfonly": {"a": 1}},
)
_SCALAR_CHECKS = ({KEY_1: "sfcheck", KEY_2: 31}, {KEY_2: False, KEY_1: "x y"})
# Types a template may write in a notation of its own (MiniMax-M3 nests tags): without
# them a template still takes calls whose arguments are scalars.
_OPTIONAL: frozenset[str] = frozenset({"object", "array", "null"})
_NOTATIONS: tuple[ValueNotation, ...] = ("raw", "text", "pystr", "python", "gemma")

RenderArgs = Callable[[dict[str, Any]], "str | None"]


def derive(render: RenderArgs) -> Arguments | None:
    """How the template writes a call's arguments, or None if no candidate reproduces it."""
    one = render({KEY_1: VALUE_1})
    if one is None:
        return None
    found = _json_arguments(one, {KEY_1: VALUE_1})
    if found is not None and all(
        (text := render(dict(check))) is not None and _json_arguments(text, check) == found
        for check in _CHECKS
    ):
        return found
    return _tagged(render)


def json_span(text: str, expected: Mapping[str, Any]) -> tuple[int, int, bool] | None:
    """(start, end, as a JSON string) of ``expected`` written as JSON in ``text``."""
    decoder = json.JSONDecoder()
    for at, char in enumerate(text):
        if char not in '{"':
            continue
        try:
            value, end = decoder.raw_decode(text, at)
        except json.JSONDecodeError:
            continue
        if value == expected:
            return at, end, False
        if isinstance(value, str) and value.startswith("{"):
            try:
                if json.loads(value) == expected:
                    return at, end, True
            except json.JSONDecodeError:
                continue
    return None


def _json_arguments(text: str, expected: Mapping[str, Any]) -> JsonArguments | None:
    """JsonArguments when ``text`` holds ``expected`` as a JSON object (or JSON string)."""
    span = json_span(text, expected)
    if span is None:
        return None
    start, end, as_string = span
    written = json.loads(text[start:end]) if as_string else text[start:end]
    for indent in (None, 2, 4):
        plain = json.dumps(dict(expected), ensure_ascii=False, indent=indent)
        if written == plain:
            return JsonArguments(as_string, indent)
        if indent and "\n" in written:
            margin = written.split("\n", 1)[1][: -len(written.split("\n", 1)[1].lstrip(" "))]
            margin = margin[indent:] if len(margin) >= indent else ""
            if written == plain.replace("\n", "\n" + margin):
                return JsonArguments(as_string, indent, margin)
    return JsonArguments(as_string)


def _tagged(render: RenderArgs) -> TaggedArguments | None:
    texts = [render({}), render({KEY_1: VALUE_1}), render({KEY_1: VALUE_1, KEY_2: VALUE_2})]
    if any(t is None for t in texts):
        return None
    empty, one, two = (t for t in texts if t is not None)
    prefix = markers.common_prefix([empty, one, two])
    suffix = markers.common_suffix([t[len(prefix) :] for t in (empty, one, two)])

    def region(text: str) -> str | None:
        if not (text.startswith(prefix) and text.endswith(suffix)):
            return None
        return text[len(prefix) : len(text) - len(suffix)]

    shape = _piece_shape(region(one) or "", region(two) or "")
    if shape is None:
        return None
    open_, close, sep = shape
    chosen = _notation(render, region, open_, close)
    if chosen is None:
        return None
    notation, layouts = chosen
    syntax = TaggedArguments(
        layouts=tuple(layouts),
        notation=notation,
        sep=sep,
        open=open_,
        close=close,
        empty=region(empty) or "",
        sort_keys=_sorts_keys(render, region),
    )
    nested = {"object", "array"} <= {kind for kind, _ in layouts} or len(layouts) == 1
    for check in _CHECKS if nested and _writes_nested(render, region, syntax) else _SCALAR_CHECKS:
        text = render(dict(check))
        if text is None or region(text) != encode(syntax, check):
            return None
    return syntax


def _writes_nested(
    render: RenderArgs, region: Callable[[str], str | None], syntax: TaggedArguments
) -> bool:
    """Whether objects and arrays are written in the derived notation."""
    for _, sample in _TYPE_SAMPLES:
        if isinstance(sample, (dict, list)):
            text = render({KEY_1: sample})
            if text is None or region(text) != encode(syntax, {KEY_1: sample}):
                return False
    return True


def _piece_shape(one: str, two: str) -> tuple[str, str, str] | None:
    """(open, close, sep) around and between pieces, from one- and two-argument text."""
    layout = cut(one, {Hole.KEY: KEY_1, Hole.VALUE: VALUE_1})
    first = next((i for i, p in enumerate(layout) if isinstance(p, Hole)), None)
    last = max((i for i, p in enumerate(layout) if isinstance(p, Hole)), default=None)
    if first is None or last is None or Hole.VALUE not in layout:
        return None
    core = layout[first : last + 1]
    start = "".join(p for p in layout[:first] if isinstance(p, str))
    end = "".join(p for p in layout[last + 1 :] if isinstance(p, str))
    first_text = fill(core, {Hole.KEY: KEY_1, Hole.VALUE: VALUE_1})
    second_text = fill(core, {Hole.KEY: KEY_2, Hole.VALUE: VALUE_2})
    if not two.startswith(start + first_text) or not two.endswith(second_text + end):
        return None
    middle = two[len(start + first_text) : len(two) - len(second_text + end)]
    lead = markers.common_suffix([start, middle])
    tail = markers.common_prefix([end, middle[: len(middle) - len(lead)]])
    sep = middle[len(tail) : len(middle) - len(lead)]
    return start[: len(start) - len(lead)], end[len(tail) :], sep


def _notation(
    render: RenderArgs,
    region: Callable[[str], str | None],
    open_: str,
    close: str,
) -> tuple[ValueNotation, list[tuple[JsonType, Layout]]] | None:
    """The value notation that writes every sample type (else every one but nested values
    and null), and the piece layout per type."""
    for optional in (frozenset(), _OPTIONAL):
        for notation in _NOTATIONS:
            layouts = _layouts(render, region, open_, close, notation, optional)
            if layouts is not None:
                return notation, layouts
    return None


def _layouts(
    render: RenderArgs,
    region: Callable[[str], str | None],
    open_: str,
    close: str,
    notation: ValueNotation,
    optional: frozenset[str],
) -> list[tuple[JsonType, Layout]] | None:
    """Piece layouts per JSON type under ``notation`` (the string one first), or None."""
    found: list[tuple[JsonType, Layout]] = []
    for kind, sample in (("string", VALUE_1), *_TYPE_SAMPLES):
        text = render({KEY_1: sample})
        piece = region(text) if text is not None else None
        written = values.encode(sample, notation)
        if piece is None or not piece.startswith(open_) or not piece.endswith(close):
            if kind in optional:
                continue
            return None
        inner = piece[len(open_) : len(piece) - len(close)]
        if written not in inner:
            if kind in optional:
                continue
            return None
        layout = cut(inner, {Hole.KEY: KEY_1, Hole.VALUE: written})
        if found and holes(layout) != holes(found[0][1]):
            # The value's text may also stand in the piece's literals (type="null"): the
            # value is its last occurrence.
            at = inner.rfind(written)
            layout = (*cut(inner[:at], {Hole.KEY: KEY_1}), Hole.VALUE, inner[at + len(written) :])
            layout = tuple(p for p in layout if p != "")
            if holes(layout) != holes(found[0][1]):
                if kind in optional:
                    continue
                return None
        if not found or layout != found[0][1]:
            found.append((kind, layout))  # type: ignore[arg-type]
    return found


def _sorts_keys(render: RenderArgs, region: Callable[[str], str | None]) -> bool:
    text = render({"sfzz": "a", "sfaa": "b"})
    piece = region(text) if text is not None else None
    return piece is not None and 0 <= piece.find("sfaa") < piece.find("sfzz")


# -- writing ------------------------------------------------------------------------


def encode(syntax: Arguments, arguments: Mapping[str, Any]) -> str:
    """The arguments as the template writes them (JSON: HF's tojson spacing)."""
    if isinstance(syntax, JsonArguments):
        text = json.dumps(dict(arguments), ensure_ascii=False, indent=syntax.indent)
        if syntax.margin:
            text = text.replace("\n", "\n" + syntax.margin)
        return json.dumps(text, ensure_ascii=False) if syntax.as_string else text
    if not arguments:
        return syntax.empty
    keys = sorted(arguments) if syntax.sort_keys else list(arguments)
    pieces = []
    for key in keys:
        value = arguments[key]
        layout = syntax.layout(values.json_type(value))
        pieces.append(
            fill(layout, {Hole.KEY: key, Hole.VALUE: values.encode(value, syntax.notation)})
        )
    return syntax.open + syntax.sep.join(pieces) + syntax.close


# -- reading ------------------------------------------------------------------------


def read(
    syntax: Arguments, text: str, pos: int, until: str, schema: Mapping[str, Any] | None
) -> tuple[dict[str, Any], int] | None:
    """Arguments written at ``pos`` (the call's layout goes on with ``until``)."""
    if isinstance(syntax, JsonArguments):
        return _read_json(text, pos)
    return _read_tagged(syntax, text, pos, until, dict(schema or {}))


def _read_json(text: str, pos: int) -> tuple[dict[str, Any], int] | None:
    while pos < len(text) and text[pos].isspace():
        pos += 1
    try:
        value, end = json.JSONDecoder().raw_decode(text, pos)
    except json.JSONDecodeError:
        return None
    if isinstance(value, str):  # a JSON string holding them (as some models write them)
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return None
    return (value, end) if isinstance(value, dict) else None


def _read_tagged(
    syntax: TaggedArguments, text: str, pos: int, until: str, schema: dict[str, Any]
) -> tuple[dict[str, Any], int] | None:
    if syntax.empty.strip() and (at := match_literal(syntax.empty, text, pos)) is not None:
        return {}, at
    at = match_literal(syntax.open, text, pos)
    if at is None:
        return ({}, pos) if not syntax.open.strip() else None
    out: dict[str, Any] = {}
    ends = [lit for lit in (syntax.sep, syntax.close, until) if lit.strip()]
    while True:
        piece = _read_piece(syntax, text, at, ends, schema)
        if piece is None:
            break
        key, value, at = piece
        out[key] = value
        nxt = match_literal(syntax.sep, text, at) if syntax.sep.strip() else None
        if nxt is None:
            if syntax.sep.strip():
                break
            continue
        at = nxt
    if not out and syntax.open.strip():
        return None
    close = match_literal(syntax.close, text, at)
    return (out, close) if close is not None else None


def _read_piece(
    syntax: TaggedArguments, text: str, pos: int, ends: list[str], schema: dict[str, Any]
) -> tuple[str, Any, int] | None:
    for kind, layout in syntax.layouts:
        found = _read_layout(syntax, kind, layout, text, pos, ends, schema)
        if found is not None:
            return found
    return None


def _read_layout(
    syntax: TaggedArguments,
    kind: JsonType,
    layout: Layout,
    text: str,
    pos: int,
    ends: list[str],
    schema: dict[str, Any],
) -> tuple[str, Any, int] | None:
    key: str | None = None
    value: Any = None
    at: int | None = pos
    for i, part in enumerate(layout):
        if at is None:
            return None
        if isinstance(part, str):
            at = match_literal(part, text, at)
        elif part is Hole.KEY:
            found = _until(text, at, _next_literals(layout, i, ends))
            if found is None or (key is not None and found[0].strip() != key):
                return None
            key, at = found[0].strip(), found[1]
        else:
            read_value = _read_value(syntax, kind, layout, i, text, at, ends, schema, key)
            if read_value is None:
                return None
            value, at = read_value
    if at is None or key is None or not key or at == pos:
        return None
    return key, value, at


def _read_value(
    syntax: TaggedArguments,
    kind: JsonType,
    layout: Layout,
    i: int,
    text: str,
    at: int,
    ends: list[str],
    schema: dict[str, Any],
    key: str | None,
) -> tuple[Any, int] | None:
    if syntax.notation in values.QUOTED:
        return values.read(text, at, syntax.notation)
    found = _until(text, at, _next_literals(layout, i, ends))
    if found is None:
        return None
    typed = len(syntax.layouts) > 1
    wanted = kind if typed else _schema_type(schema, key)
    return values.decode_text(found[0], wanted), found[1]


def _schema_type(schema: dict[str, Any], key: str | None) -> str | None:
    prop = (schema.get("properties") or {}).get(key or "")
    kind = prop.get("type") if isinstance(prop, dict) else None
    return kind if isinstance(kind, str) else None


def _next_literals(layout: Layout, i: int, ends: list[str]) -> list[str]:
    nxt = layout[i + 1] if i + 1 < len(layout) else ""
    return [nxt] if isinstance(nxt, str) and nxt.strip() else ends


def _until(text: str, pos: int, literals: list[str]) -> tuple[str, int] | None:
    """(text up to the earliest of ``literals``, where it starts), or None if none follows."""
    best: tuple[int, int] | None = None
    for literal in literals:
        found = find_literal(literal, text, pos)
        if found is not None and (best is None or found[0] < best[0]):
            best = found
    if best is None:
        return None
    return text[pos : best[0]], best[0]

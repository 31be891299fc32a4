"""GBNF for one forced tool call, written the way the template writes calls.

The call follows the template's ``CallSyntax`` (its literals, the chosen tool's name,
a fresh id), its arguments constrained by the tool's schema. JSON arguments go through
llama.cpp's schema converter. Tagged arguments become one piece per property of the
tool's schema (in schema order, or sorted where the template sorts keys), required
ones always and optional ones optionally, each value written in
the template's notation: a plain string never holds the character that starts what
follows it, so it cannot run into the markup; other values are JSON, or Python or
Gemma 4 literals, as the notation says.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from jupyter_superfluid.chat.grammars import (
    DEFAULT_REASONING_CHARS,
    THINK,
    Rules,
    gbnf_literal,
    gbnf_not,
    reasoning_prefix,
)
from jupyter_superfluid.chat.syntax import values
from jupyter_superfluid.chat.syntax.model import (
    CallSyntax,
    Hole,
    JsonArguments,
    JsonType,
    ReasoningSyntax,
    TaggedArguments,
    ValueNotation,
)
from jupyter_superfluid.chat.types import ToolSpec

_ANY_OBJECT: dict[str, Any] = {"type": "object"}
_MAX_FREE_STRING = 256


def call_grammar(
    syntax: CallSyntax,
    tools: Sequence[ToolSpec],
    *,
    only: str | None = None,
    call_id: str = "call_0",
    reasoning: ReasoningSyntax | None = None,
    reasoning_chars: int = DEFAULT_REASONING_CHARS,
) -> str:
    """A grammar for exactly one call, written as ``syntax`` writes calls, to one of
    ``tools`` (or the one named ``only``), its arguments matching the tool's schema."""
    chosen = [t for t in tools if only is None or t.qualified_name == only]
    if not chosen:
        raise ValueError(f"no tool named {only!r}" if only else "no tools to call")
    rules = Rules()
    prefix = reasoning_prefix(rules, reasoning, reasoning_chars)
    alternatives = []
    for i, tool in enumerate(chosen):
        parts = []
        for at, piece in enumerate(syntax.call):
            if isinstance(piece, str):
                parts.append(gbnf_literal(piece))
            elif piece is Hole.NAME:
                parts.append(gbnf_literal(tool.qualified_name))
            elif piece is Hole.ID:
                parts.append(gbnf_literal(call_id))
            elif piece is Hole.INDEX:
                parts.append(gbnf_literal(str(syntax.index_base)))
            else:
                follow = syntax.call[at + 1] if at + 1 < len(syntax.call) else ""
                until = follow if isinstance(follow, str) else ""
                parts.append(arguments_rule(rules, syntax, tool, f"call{i}", until))
        alternatives.append(rules.add(f"call{i}", " ".join(parts)))
    body = rules.add("call", " | ".join(alternatives))
    section = [gbnf_literal(syntax.section_open)] if syntax.section_open else []
    section.append(body)
    if syntax.section_close:
        section.append(gbnf_literal(syntax.section_close))
    indented = isinstance(syntax.arguments, JsonArguments) and syntax.arguments.indent is not None
    return rules.grammar(prefix + " ".join(section), indented=indented)


def tool_call_grammar(
    tools: Sequence[ToolSpec],
    *,
    only: str | None = None,
    reasoning: bool = False,
    reasoning_chars: int = DEFAULT_REASONING_CHARS,
) -> str:
    """A grammar for exactly one Hermes ``<tool_call>`` to one of ``tools`` (or ``only``)."""
    return call_grammar(
        HERMES_CALLS,
        tools,
        only=only,
        reasoning=THINK if reasoning else None,
        reasoning_chars=reasoning_chars,
    )


# The layout the Qwen3/Hermes templates show the model and render past calls in.
HERMES_CALLS = CallSyntax(
    call=('<tool_call>\n{"name": "', Hole.NAME, '", "arguments": ', Hole.ARGS, "}\n</tool_call>"),
    arguments=JsonArguments(),
    sep="\n",
)


def arguments_rule(rules: Rules, syntax: CallSyntax, tool: ToolSpec, name: str, until: str) -> str:
    """A rule for ``tool``'s arguments as ``syntax`` writes them; returns its name."""
    schema = tool.parameters or _ANY_OBJECT
    args = syntax.arguments
    if isinstance(args, JsonArguments):
        rule = rules.schema(schema, f"{name}-args")
        if args.as_string:
            # Arguments held in a JSON string: any string (the converter cannot nest).
            return rules.add(f"{name}-args-string", '"\\"" char* "\\""')
        return rule
    return _tagged(rules, args, schema, f"{name}-args", until)


def _tagged(
    rules: Rules, args: TaggedArguments, schema: Mapping[str, Any], name: str, until: str
) -> str:
    ends = "".join(lit[:1] for lit in (args.sep, args.close, until) if lit) or "<"
    properties = schema.get("properties") if isinstance(schema.get("properties"), dict) else None
    if not properties:
        return _free(rules, args, name, ends)
    keys = sorted(properties) if args.sort_keys else list(properties)
    required = set(schema.get("required") or [])
    items = []
    for i, key in enumerate(keys):
        prop = properties[key] if isinstance(properties[key], dict) else {}
        piece = _piece(rules, args, key, prop, f"{name}-p{i}", ends)
        items.append((piece, key in required))
    body = _sequence(rules, items, args.sep, name)
    wrapped = " ".join(p for p in (_lit(args.open), body, _lit(args.close)) if p)
    if any(req for _, req in items) or not args.empty:
        return rules.add(name, wrapped or '""')
    return rules.add(name, f"{_lit(args.empty)} | {wrapped}")


def _free(rules: Rules, args: TaggedArguments, name: str, ends: str) -> str:
    """Arguments of a schema without properties: any keys, string values."""
    layout = args.layout("string")
    parts = []
    for at, part in enumerate(layout):
        if isinstance(part, str):
            parts.append(gbnf_literal(part))
        elif part is Hole.KEY:
            parts.append("[a-zA-Z_] [a-zA-Z0-9_]{0,31}")
        else:
            stop = _stop(layout, at, ends)
            parts.append(_string(args.notation, stop))
    piece = rules.add(f"{name}-piece", " ".join(parts))
    sep = _lit(args.sep)
    more = f"({sep} {piece})*" if sep else f"{piece}*"
    body = f"{_lit(args.open)} {piece} {more} {_lit(args.close)}".strip()
    return rules.add(name, f"({body})?" if not args.empty else f"{_lit(args.empty)} | {body}")


def _piece(
    rules: Rules,
    args: TaggedArguments,
    key: str,
    prop: Mapping[str, Any],
    name: str,
    ends: str,
) -> str:
    kind = _json_type(prop)
    layout = args.layout(kind)
    parts = []
    for at, part in enumerate(layout):
        if isinstance(part, str):
            parts.append(gbnf_literal(part))
        elif part is Hole.KEY:
            parts.append(gbnf_literal(key))
        else:
            parts.append(_value(rules, args.notation, prop, f"{name}-v", _stop(layout, at, ends)))
    return rules.add(name, " ".join(parts))


def _stop(layout: tuple[Any, ...], at: int, ends: str) -> str:
    """Characters a plain string value must not hold: the start of what follows it."""
    nxt = layout[at + 1] if at + 1 < len(layout) else ""
    return (nxt[:1] if isinstance(nxt, str) and nxt else ends) + "<"


def _json_type(prop: Mapping[str, Any]) -> JsonType:
    kind = prop.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if kind == "integer":
        return "number"
    if kind in ("string", "number", "boolean", "null", "array", "object"):
        return kind  # type: ignore[return-value]
    if "enum" in prop and not all(isinstance(v, str) for v in prop["enum"]):
        return values.json_type(prop["enum"][0])
    return "string"


def _value(
    rules: Rules, notation: ValueNotation, prop: Mapping[str, Any], name: str, stop: str
) -> str:
    """A rule for one value of schema ``prop`` written in ``notation``."""
    enum = prop.get("enum")
    if isinstance(enum, list) and enum:
        return "(" + " | ".join(gbnf_literal(values.encode(v, notation)) for v in enum) + ")"
    kind = _json_type(prop)
    if kind == "string":
        return _string(notation, stop, prop.get("maxLength"))
    if notation == "gemma":
        return _gemma(rules, prop, name)
    if kind == "boolean" and notation in ("text", "pystr", "python"):
        return '("True" | "False")'
    if kind == "null" and notation in ("text", "pystr", "python"):
        return '"None"'
    return rules.schema(prop, name)


def _string(notation: ValueNotation, stop: str, max_length: Any = None) -> str:
    """A string value: bounded (by the schema's maxLength, else _MAX_FREE_STRING)."""
    most = max_length if isinstance(max_length, int) and max_length >= 0 else _MAX_FREE_STRING
    if notation == "python":
        return f'"\'" {gbnf_not(chr(39) + "<")}{{0,{most}}} "\'"'
    if notation == "gemma":
        quote = gbnf_literal(values.GEMMA_QUOTE)
        return f"{quote} {gbnf_not('<')}{{0,{most}}} {quote}"
    return f"{gbnf_not(stop)}{{0,{most}}}"


def _gemma(rules: Rules, prop: Mapping[str, Any], name: str) -> str:
    """A value in Gemma 4's notation (objects with bare, sorted keys)."""
    kind = _json_type(prop)
    if kind == "string":
        return _string("gemma", "<")
    if kind == "boolean":
        return '("true" | "false")'
    if kind == "null":
        return '"None"'
    if kind == "number":
        return rules.schema({"type": prop.get("type", "number")}, f"{name}-n")
    if kind == "array":
        found = prop.get("items")
        items: Mapping[str, Any] = found if isinstance(found, dict) else {"type": "string"}
        item = rules.add(f"{name}-i", _gemma(rules, items, f"{name}-i"))
        return f'"[" ({item} ("," {item})*)? "]"'
    listed = prop.get("properties")
    properties: Mapping[str, Any] = listed if isinstance(listed, dict) else {}
    required = set(prop.get("required") or [])
    parts = []
    for i, key in enumerate(sorted(properties)):
        inner = properties[key] if isinstance(properties[key], dict) else {}
        value = rules.add(f"{name}-k{i}", _gemma(rules, inner, f"{name}-k{i}"))
        parts.append(
            (rules.add(f"{name}-e{i}", f"{gbnf_literal(key + ':')} {value}"), key in required)
        )
    body = _sequence(rules, parts, ",", f"{name}-o") if parts else ""
    return f'"{{" {body} "}}"'.replace("  ", " ")


def _sequence(rules: Rules, items: list[tuple[str, bool]], sep: str, name: str) -> str:
    """A rule for ``items`` in order, joined by ``sep``: required ones always there,
    optional ones maybe."""
    memo: dict[tuple[int, bool], str] = {}

    def tail(k: int, after_one: bool) -> str:
        if k == len(items):
            return ""
        if (k, after_one) in memo:
            return memo[(k, after_one)]
        rule, required = items[k]
        lead = f"{_lit(sep)} " if after_one and sep else ""
        taken = f"{lead}{rule} {tail(k + 1, True)}".strip()
        body = taken if required else f"{taken} | {tail(k + 1, after_one) or chr(34) * 2}"
        memo[(k, after_one)] = rules.add(f"{name}-s{k}{int(after_one)}", body)
        return memo[(k, after_one)]

    return tail(0, False)


def _lit(text: str) -> str:
    return gbnf_literal(text) if text else ""

"""A template's syntax and probe results in one row: the docs' table of the corpus.

``probe_conversations`` are the conversations every template must render (or refuse
with its own message, which the API answers as a 400): system and user; with tools; an
assistant turn with one call and its result; one with two calls and their results; a
multi-turn conversation with reasoning. ``python -m tools.doc_tables`` writes the
table of llama.cpp's corpus into docs/user-guide/chat-templates.md; the corpus tests
check what it claims.
"""

from __future__ import annotations

from dataclasses import dataclass

from jupyter_superfluid.chat.environment import TemplateRefusal
from jupyter_superfluid.chat.syntax.model import (
    CallSyntax,
    Hole,
    JsonArguments,
    Layout,
    TaggedArguments,
    TemplateSyntax,
)
from jupyter_superfluid.chat.types import ChatMessage, ToolCall, ToolSpec

_SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
TOOLS = (
    ToolSpec(name="get_weather", description="Weather for a city.", parameters=_SCHEMA),
    ToolSpec(name="get_time", description="Time in a city.", parameters=_SCHEMA),
)
_SYSTEM = ChatMessage("system", "Be terse.")
_USER = ChatMessage("user", "Weather and time in Paris?")
_ONE = ToolCall("call_w1", "get_weather", '{"city": "Paris"}')
_TWO = ToolCall("call_t2", "get_time", '{"city": "Paris"}')


def probe_conversations() -> dict[str, tuple[tuple[ChatMessage, ...], tuple[ToolSpec, ...]]]:
    """The probe conversations by name: (messages, tools)."""
    return {
        "system+user": ((_SYSTEM, _USER), ()),
        "tools": ((_SYSTEM, _USER), TOOLS),
        "one call": (
            (
                _SYSTEM,
                _USER,
                ChatMessage("assistant", tool_calls=(_ONE,)),
                ChatMessage("tool", "18 C", tool_call_id=_ONE.call_id),
            ),
            TOOLS,
        ),
        "two calls": (
            (
                _SYSTEM,
                _USER,
                ChatMessage("assistant", tool_calls=(_ONE, _TWO)),
                ChatMessage("tool", "18 C", tool_call_id=_ONE.call_id),
                ChatMessage("tool", "14:00", tool_call_id=_TWO.call_id),
            ),
            TOOLS,
        ),
        "reasoning": (
            (
                _SYSTEM,
                ChatMessage("user", "Hi."),
                ChatMessage("assistant", "Hello.", reasoning="Greet back."),
                ChatMessage("user", "Weather?"),
                ChatMessage("assistant", "Sunny.", reasoning="Guess."),
                ChatMessage("user", "Thanks."),
            ),
            (),
        ),
    }


@dataclass(frozen=True)
class TemplateReport:
    """One template's row."""

    name: str
    family: str
    calls: str
    reasoning: str
    per_message: bool
    thinking: str
    generic: str  # what the generic format carries ("" when nothing)
    refusals: tuple[tuple[str, str], ...]  # (probe, the template's message)


def report(name: str, codec: object) -> TemplateReport:
    """The row of a template (``codec`` a ChatCodec)."""
    syntax: TemplateSyntax = codec.syntax  # type: ignore[attr-defined]
    refusals = []
    for probe, (messages, tools) in probe_conversations().items():
        try:
            codec.render(messages, tools=tools)  # type: ignore[attr-defined]
        except TemplateRefusal as err:
            refusals.append((probe, str(err).split(": ", 1)[-1]))
    switch = codec.thinking_switch  # type: ignore[attr-defined]
    efforts = codec.reasoning_efforts  # type: ignore[attr-defined]
    thinking = ", ".join(filter(None, (switch or "", "/".join(efforts))))
    found = syntax.reasoning
    return TemplateReport(
        name=name,
        family=syntax.family,
        calls=describe_calls(syntax.calls) if syntax.calls else "",
        reasoning=f"{found.open}…{found.close}" if found else "",
        per_message=bool(codec.renders_per_message),  # type: ignore[attr-defined]
        thinking=thinking,
        generic=_generic(syntax),
        refusals=tuple(refusals),
    )


def _generic(syntax: TemplateSyntax) -> str:
    parts = []
    if not syntax.describes_tools:
        parts.append("tools described")
    if not syntax.renders_calls:
        parts.append("calls as JSON text")
    if not syntax.renders_results:
        parts.append("results as user text")
    return ", ".join(parts)


def describe_calls(calls: CallSyntax) -> str:
    """A call syntax in one line: the section with ``NAME``, ``ID`` and the arguments."""
    args = calls.arguments
    if isinstance(args, JsonArguments):
        written = "{json}" if not args.as_string else '"{json}"'
    else:
        written = _layout(args.layouts[0][1], args)
        written = f"{args.open}{written}…{args.close}" if args.open or args.close else written + "…"
    body = "".join(_hole(p, written) if isinstance(p, Hole) else p for p in calls.call)
    more = "" if calls.parallel else " (one call a turn)"
    return f"{calls.section_open}{body}{calls.section_close}{more}"


def _layout(layout: Layout, args: TaggedArguments) -> str:
    return "".join(p.name if isinstance(p, Hole) else p for p in layout)


def _hole(hole: Hole, args: str) -> str:
    return {Hole.ARGS: args, Hole.INDEX: "N"}.get(hole, hole.name)


def _cell(text: str) -> str:
    """Text for a Markdown table cell: visible newlines, escaped bars."""
    shown = text.replace("\n", "⏎").replace("|", "\\|")
    return f"`{shown}`" if shown else "—"


def table(reports: list[TemplateReport]) -> str:
    """The Markdown table of ``reports``."""
    rows = [
        "| template | family | tool calls | reasoning | per message | thinking "
        "| generic format | probe conversations |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in reports:
        refused = "; ".join(f"{p}: 400 “{m}”" for p, m in r.refusals) or "all render"
        rows.append(
            f"| {r.name} | {r.family} | {_cell(r.calls)} | {_cell(r.reasoning)} "
            f"| {'yes' if r.per_message else 'no'} | {r.thinking or '—'} "
            f"| {r.generic or '—'} | {refused.replace('|', chr(92) + '|')} |"
        )
    return "\n".join(rows)

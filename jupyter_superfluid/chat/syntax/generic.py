"""The generic tool format, for templates that leave out part of tool calling.

As llama-server does for such templates: when a template does not show the tools to
the model, they are described in the system text (with how to call them, in the
template's own call syntax where it has one); when it does not render an assistant's
calls, they are written into the turn's text as JSON objects (and a grammar forces
that JSON); when it does not render tool results, they come back as user text. The
adaptation works on neutral messages, before the template sees them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from jupyter_superfluid.chat.syntax.calls import write_section
from jupyter_superfluid.chat.syntax.model import (
    CallSyntax,
    Hole,
    JsonArguments,
    JsonCall,
    TemplateSyntax,
)
from jupyter_superfluid.chat.types import ChatMessage, ToolCall, ToolSpec

GENERIC_CALLS = CallSyntax(
    call=('{"tool_call": {"name": "', Hole.NAME, '", "arguments": ', Hole.ARGS, "}}"),
    arguments=JsonArguments(),
    sep="\n",
    json_call=JsonCall(name=("tool_call", "name"), arguments=("tool_call", "arguments")),
)
_EXAMPLE_NAME = "TOOL_NAME"
_EXAMPLE_ARGS = {"ARGUMENT": "VALUE"}


def needs_adapting(syntax: TemplateSyntax) -> bool:
    """Whether some part of tool calling is the generic format's to carry."""
    return not (syntax.describes_tools and syntax.renders_calls and syntax.renders_results)


def tools_text(tools: Sequence[ToolSpec], calls: CallSyntax) -> str:
    """The system text that shows ``tools`` and how to call them."""
    specs = [
        {"name": t.qualified_name, "description": t.description or "", "parameters": t.parameters}
        for t in tools
    ]
    example = write_section(calls, [("call_1", _EXAMPLE_NAME, _EXAMPLE_ARGS)])
    return (
        "You can call these tools (their arguments are JSON schemas):\n"
        + json.dumps(specs, ensure_ascii=False)
        + "\nTo call a tool, reply with the call alone, written like this (one per line):\n"
        + example
    )


def calls_text(calls: Sequence[ToolCall], syntax: CallSyntax) -> str:
    """An assistant's calls written as text in ``syntax``."""
    written = [(c.call_id, c.qualified_name, _arguments(c)) for c in calls]
    return write_section(syntax, written)


def _arguments(call: ToolCall) -> dict[str, Any]:
    try:
        value = json.loads(call.arguments) if call.arguments else {}
    except json.JSONDecodeError:
        return {"arguments": call.arguments}
    return value if isinstance(value, dict) else {"value": value}


def adapt(
    messages: Sequence[ChatMessage], tools: Sequence[ToolSpec], syntax: TemplateSyntax
) -> list[ChatMessage]:
    """``messages`` with what the template leaves out of tool calling carried as text."""
    calls = syntax.calls or GENERIC_CALLS
    out = list(messages)
    if tools and not syntax.describes_tools:
        out = _describe(out, tools_text(tools, calls))
    if not syntax.renders_calls:
        out = [_calls_as_text(m, calls) for m in out]
    if not syntax.renders_results:
        out = _results_as_user(out)
    return out


def _describe(messages: list[ChatMessage], text: str) -> list[ChatMessage]:
    if messages and messages[0].role == "system":
        lead = messages[0]
        joined = f"{lead.content}\n\n{text}" if lead.content else text
        return [replace(lead, content=joined), *messages[1:]]
    return [ChatMessage("system", text), *messages]


def _calls_as_text(message: ChatMessage, calls: CallSyntax) -> ChatMessage:
    if message.role != "assistant" or not message.tool_calls:
        return message
    text = calls_text(message.tool_calls, calls)
    content = f"{message.content}\n{text}" if message.content else text
    return replace(message, content=content, tool_calls=())


def _results_as_user(messages: list[ChatMessage]) -> list[ChatMessage]:
    names = {c.call_id: c.qualified_name for m in messages for c in m.tool_calls}
    out: list[ChatMessage] = []
    for message in messages:
        if message.role != "tool":
            if message.role == "user" and out and out[-1].role == "user" and out[-1].tool_call_id:
                out[-1] = _joined(out[-1], message)
            else:
                out.append(message)
            continue
        name = names.get(message.tool_call_id or "", "")
        text = json.dumps(
            {"tool_response": {"name": name, "content": message.content}}, ensure_ascii=False
        )
        result = ChatMessage("user", text, tool_call_id="", media=message.media)
        if out and out[-1].role == "user" and out[-1].tool_call_id is not None:
            out[-1] = _joined(out[-1], result)
        else:
            out.append(result)
    return [replace(m, tool_call_id=None) if m.role == "user" else m for m in out]


def _joined(first: ChatMessage, second: ChatMessage) -> ChatMessage:
    """Two user messages as one (templates that need roles to alternate)."""
    return replace(
        first, content=f"{first.content}\n{second.content}", media=first.media + second.media
    )

"""Neutral chat messages as the dicts a chat template reads, in the form that template takes.

Templates differ in what they accept: some have no system role (its text then leads the
first user turn, as llama.cpp does), some demand call ids of their own shape (Mistral: 9
alphanumerics; a client's id is mapped to one deterministically, and an id already of
that shape is kept, so ids the model wrote come back unchanged), some take a call's
arguments only as a JSON string. A ``MessageForm`` says which, found by probing.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from jupyter_superfluid.chat.types import ChatMessage, ToolCall, ToolSpec

_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


@dataclass(frozen=True)
class CallIdForm:
    """A shape of call id a template demands: a regular expression and a length."""

    name: str
    pattern: str  # a call id matching it is passed as is
    length: int = 0  # mapped ids: this many characters of _ALPHABET (0: no mapping)

    def matches(self, call_id: str) -> bool:
        """Whether ``call_id`` already has this shape."""
        return re.fullmatch(self.pattern, call_id) is not None

    def map(self, call_id: str) -> str:
        """``call_id`` in this shape: itself if it has it, else a stable digest of it."""
        if not self.length or self.matches(call_id):
            return call_id
        number = int.from_bytes(hashlib.sha256(call_id.encode()).digest(), "big")
        digits = []
        for _ in range(self.length):
            number, digit = divmod(number, len(_ALPHABET))
            digits.append(_ALPHABET[digit])
        return "".join(digits)


ANY_ID = CallIdForm("any", r".+")
ALNUM9_ID = CallIdForm("9 alphanumerics", r"[A-Za-z0-9]{9}", 9)
CALL_ID_FORMS = (ANY_ID, ALNUM9_ID)


@dataclass(frozen=True)
class MessageForm:
    """How a template takes messages: system role, call id shape, argument form."""

    system_role: bool = True
    call_ids: CallIdForm = ANY_ID
    object_arguments: bool = True  # False: arguments as the JSON string
    empty_tools: bool = False  # no tools passed as [] (templates that loop over them)
    reasoning_key: str = "reasoning_content"  # the message key the template reads reasoning from
    functions_variable: bool = False  # the tool list as a JSON string named `functions`


DEFAULT_FORM = MessageForm()


def call_dict(call: ToolCall, form: MessageForm = DEFAULT_FORM) -> dict[str, Any]:
    """One tool call as OpenAI's dict (arguments parsed unless the form takes strings)."""
    arguments: Any = call.arguments
    if form.object_arguments:
        try:
            arguments = json.loads(call.arguments) if call.arguments else {}
        except json.JSONDecodeError:
            arguments = call.arguments  # templates print a string argument as is
    return {
        "type": "function",
        "id": form.call_ids.map(call.call_id),
        "function": {"name": call.qualified_name, "arguments": arguments},
    }


def message_dict(message: ChatMessage, form: MessageForm = DEFAULT_FORM) -> dict[str, Any]:
    """The HF-style dict a chat template expects for one neutral message."""
    out: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.reasoning is not None:
        out[form.reasoning_key] = message.reasoning
    if message.tool_calls:
        out["tool_calls"] = [call_dict(c, form) for c in message.tool_calls]
    if message.tool_call_id is not None:
        out["tool_call_id"] = form.call_ids.map(message.tool_call_id)
    return out


def tool_dict(tool: ToolSpec) -> dict[str, Any]:
    """The OpenAI function-tool dict a chat template expects (qualified name)."""
    function: dict[str, Any] = {"name": tool.qualified_name}
    if tool.description is not None:
        function["description"] = tool.description
    function["parameters"] = tool.parameters or {"type": "object", "properties": {}}
    return {"type": "function", "function": function}


def tools_context(tools: Sequence[ToolSpec], form: MessageForm = DEFAULT_FORM) -> dict[str, Any]:
    """The template variables that carry ``tools`` (HF's ``tools``; ``functions`` for some)."""
    listed = [tool_dict(t) for t in tools]
    context: dict[str, Any] = {"tools": listed or ([] if form.empty_tools else None)}
    if form.functions_variable and listed:
        # firefunction-v2's documented call: functions=json.dumps(specs, indent=4)
        context["functions"] = json.dumps([t["function"] for t in listed], indent=4)
    return context


def merge_system(messages: Sequence[ChatMessage]) -> list[ChatMessage]:
    """A leading system message folded into the first user turn (or dropped if none follows)."""
    out = list(messages)
    if not out or out[0].role != "system":
        return out
    system = out.pop(0)
    for i, message in enumerate(out):
        if message.role == "user":
            content = (
                f"{system.content}\n\n{message.content}" if message.content else system.content
            )
            out[i] = replace(message, content=content, media=system.media + message.media)
            break
        if message.role != "system":
            out.insert(0, ChatMessage("user", system.content, media=system.media))
            break
    else:
        out.insert(0, ChatMessage("user", system.content, media=system.media))
    return out


def template_messages(
    messages: Sequence[ChatMessage], form: MessageForm = DEFAULT_FORM
) -> list[dict[str, Any]]:
    """The dicts for ``messages`` in the template's form."""
    adapted = list(messages) if form.system_role else merge_system(messages)
    return [message_dict(m, form) for m in adapted]

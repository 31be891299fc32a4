"""Responses-style input items and tools (``wire``'s models) → neutral messages and specs.

Shared by the OpenAI Responses API and LMSP, whose items have the same shapes,
and by the store (continuing a conversation reads its stored items back through
the same models). The models check shapes and types (a validation error names
the field, ``input[2].content[0].text``); turning them into ``ChatMessage``
values checks what only the content can tell (media, built-in tools).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from pydantic import BaseModel, ValidationError

from jupyter_superfluid.chat.types import (
    ChatMessage,
    MediaInput,
    OutputFormat,
    ToolCall,
    ToolChoice,
    ToolSpec,
)
from jupyter_superfluid.errors import APIError, InvalidRequest, UnsupportedParameter
from jupyter_superfluid.generation.input_files import file_part_text
from jupyter_superfluid.generation.media import MEDIA_MARKER, audio_part, image_url_part
from jupyter_superfluid.generation.wire import (
    STORED_ITEMS,
    AudioPart,
    FilePart,
    FunctionCallItem,
    FunctionCallOutputItem,
    FunctionChoice,
    FunctionTool,
    ImagePart,
    MessageItem,
    NamespaceTool,
    ReasoningItem,
    RefusalPart,
    TextPart,
)
from jupyter_superfluid.validation import check_schema, invalid, parse

ROLES = {"user": "user", "system": "system", "developer": "system", "assistant": "assistant"}


class UnsupportedTool(APIError):
    """A built-in tool this server does not run (400 ``unsupported_tool``)."""

    code = "unsupported_tool"


# -- to neutral values -------------------------------------------------------------------


def normalize_input(raw: str | Sequence[Any]) -> list[Any]:
    """The input as a list of items (a string is one user message)."""
    if isinstance(raw, str):
        return [MessageItem(role="user", content=[TextPart(type="input_text", text=raw)])]
    return list(raw)


def part_text(part: Any, param: str) -> str:
    """The text of one content part, or a 400 saying why it cannot be used."""
    if isinstance(part, TextPart):
        return part.text
    if isinstance(part, RefusalPart):
        return part.refusal
    if isinstance(part, ImagePart | AudioPart):
        part_media(part, param)  # the part's own errors first
        raise InvalidRequest(
            f"{param}: images and audio are accepted in message content only",
            param=param,
            code="unsupported_input",
        )
    if isinstance(part, FilePart):
        return file_part_text(part, param)
    raise UnsupportedParameter(f"{param}: this part type is not supported", param=param)


def part_media(part: ImagePart | AudioPart, param: str) -> MediaInput:
    """An ``input_image`` (data: URL) or ``input_audio`` part as a neutral medium."""
    if isinstance(part, AudioPart):
        return audio_part(part.model_dump(), param)
    if part.file_id:
        raise UnsupportedParameter("input_image by file_id is not supported", param=param)
    return image_url_part(part.image_url, param, f"{param}.image_url")


def content_text(content: str | list[Any], param: str) -> str:
    """A text-only content: a string or a list of text parts."""
    if isinstance(content, str):
        return content
    return "".join(part_text(p, f"{param}[{j}]") for j, p in enumerate(content))


def message_content(content: str | list[Any], param: str) -> tuple[str, tuple[MediaInput, ...]]:
    """A message's content and media: text parts joined, each medium as MEDIA_MARKER."""
    if isinstance(content, str):
        return content, ()
    texts: list[str] = []
    media: list[MediaInput] = []
    for j, part in enumerate(content):
        if isinstance(part, ImagePart | AudioPart):
            media.append(part_media(part, f"{param}[{j}]"))
            texts.append(MEDIA_MARKER)
        else:
            texts.append(part_text(part, f"{param}[{j}]"))
    return "".join(texts), tuple(media)


class _Turns:
    """Builds the message list, joining calls and reasoning to their assistant turns."""

    def __init__(self) -> None:
        self.messages: list[ChatMessage] = []
        self.reasoning: str | None = None

    def add(self, message: ChatMessage) -> None:
        if message.role == "assistant" and self.reasoning is not None:
            message = replace(message, reasoning=self.reasoning)
            self.reasoning = None
        self.messages.append(message)

    def add_call(self, call: ToolCall) -> None:
        last = self.messages[-1] if self.messages else None
        if last is not None and last.role == "assistant" and self.reasoning is None:
            self.messages[-1] = replace(last, tool_calls=(*last.tool_calls, call))
        else:
            self.add(ChatMessage("assistant", "", tool_calls=(call,)))


def messages_from_items(items: Sequence[Any], param: str = "input") -> tuple[ChatMessage, ...]:
    """Neutral messages for validated input (or output) items."""
    turns = _Turns()
    for i, item in enumerate(items):
        at = f"{param}[{i}]"
        if isinstance(item, MessageItem):
            text, media = message_content(item.content, f"{at}.content")
            turns.add(ChatMessage(ROLES[item.role], text, media=media))  # type: ignore[arg-type]
        elif isinstance(item, FunctionCallItem):
            call = ToolCall(item.call_id, item.name, item.arguments, item.namespace)
            turns.add_call(call)
        elif isinstance(item, FunctionCallOutputItem):
            text = content_text(item.output, f"{at}.output")
            turns.add(ChatMessage("tool", text, tool_call_id=item.call_id))
        elif isinstance(item, ReasoningItem):
            parts = item.content or item.summary
            text = "".join(part_text(p, f"{at}.content[{j}]") for j, p in enumerate(parts))
            turns.reasoning = (turns.reasoning or "") + text
        else:
            raise UnsupportedParameter("item_reference items are not supported", param=at)
    return tuple(turns.messages)


async def messages_off_the_loop(
    items: Sequence[Any], param: str = "input"
) -> tuple[ChatMessage, ...]:
    """``messages_from_items``, on a worker thread when a file must be read (a PDF's text
    can take seconds to extract; the event loop, and so Jupyter, never waits for it)."""
    if not any(_has_file(item) for item in items):
        return messages_from_items(items, param)
    return await asyncio.to_thread(messages_from_items, items, param)


def _has_file(item: Any) -> bool:
    content = getattr(item, "content", None)
    return isinstance(content, list) and any(isinstance(p, FilePart) for p in content)


def messages_from_json(items: Sequence[Any], param: str = "input") -> tuple[ChatMessage, ...]:
    """Neutral messages of items already checked as JSON (a protocol's, or stored ones)."""
    try:
        typed = STORED_ITEMS.validate_python(list(items))
    except ValidationError as err:
        raise invalid(err, list(items), param) from err
    return messages_from_items(typed, param)


def to_tools(raw: Sequence[Any]) -> tuple[ToolSpec, ...]:
    """Function and namespace tools as neutral specs; built-in tools are refused."""
    specs: list[ToolSpec] = []
    for i, tool in enumerate(raw):
        at = f"tools[{i}]"
        if isinstance(tool, FunctionTool):
            if tool.parameters is not None:
                check_schema(tool.parameters, f"{at}.parameters")
            specs.append(ToolSpec(tool.name, tool.description, tool.parameters))
        elif isinstance(tool, NamespaceTool):
            for j, member in enumerate(tool.tools):
                kind = member.get("type") if isinstance(member, dict) else None
                if kind != "function":
                    raise UnsupportedTool(
                        f"{at}.tools[{j}]: only function tools can be namespace members",
                        param=f"{at}.tools[{j}].type",
                    )
                fn = parse(FunctionTool, member, prefix=f"{at}.tools[{j}]")
                if fn.parameters is not None:
                    check_schema(fn.parameters, f"{at}.tools[{j}].parameters")
                specs.append(ToolSpec(fn.name, fn.description, fn.parameters, tool.name))
        else:
            raise UnsupportedTool(
                f"built-in tool {tool.type!r} is not supported; only function and namespace tools",
                param=f"{at}.type",
            )
    names = [s.qualified_name for s in specs]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise InvalidRequest(f"duplicate tool names: {sorted(dup)}", param="tools")
    return tuple(specs)


def to_tool_choice(raw: Any, tools: tuple[ToolSpec, ...]) -> ToolChoice:
    """auto, none, required, or a named function tool."""
    if isinstance(raw, str):
        if raw == "required" and not tools:
            raise InvalidRequest("tool_choice 'required' needs tools", param="tool_choice")
        return ToolChoice(raw)  # type: ignore[arg-type]
    if not isinstance(raw, FunctionChoice):
        raise UnsupportedParameter(
            'tool_choice must be auto, none, required or {"type": "function", "name": ...}',
            param="tool_choice",
        )
    name = f"{raw.namespace}.{raw.name}" if raw.namespace else raw.name
    matches = [t for t in tools if name in (t.qualified_name, t.name)]
    if len(matches) != 1:
        raise InvalidRequest(
            f"tool_choice names {name!r}, which is not one of the tools", param="tool_choice.name"
        )
    return ToolChoice("function", matches[0].qualified_name)


def to_output_format(fmt: Any, param: str = "text.format") -> OutputFormat:
    """A validated ``text.format`` as a neutral output format."""
    if fmt is None or fmt.type == "text":
        return OutputFormat()
    if fmt.type == "json_object":
        return OutputFormat("json_object")
    check_schema(fmt.schema_, f"{param}.schema")
    return OutputFormat("json_schema", fmt.schema_, fmt.name, param=f"{param}.schema")


def dump_items(items: Sequence[Any]) -> list[dict[str, Any]]:
    """Validated items as the JSON the store keeps."""
    return [i.model_dump(exclude_none=True) if isinstance(i, BaseModel) else dict(i) for i in items]


def with_ids(items: list[dict[str, Any]], rid: str) -> list[dict[str, Any]]:
    """Stored input items: each with an id, and message content as parts (as OpenAI lists them)."""
    hexid = rid.removeprefix("resp_")
    out = []
    for j, item in enumerate(items):
        item = dict(item)
        kind = item.get("type", "message")
        item.setdefault("type", kind)
        if kind == "message" and isinstance(item.get("content"), str):
            # Stored input items carry content parts, as OpenAI lists them.
            part = "output_text" if item.get("role") == "assistant" else "input_text"
            item["content"] = [{"type": part, "text": item["content"]}]
        if "id" not in item:
            prefix = {
                "message": "msg",
                "function_call": "fc",
                "function_call_output": "fco",
                "reasoning": "rs",
            }.get(kind, "item")
            item["id"] = f"{prefix}_{hexid}_in{j}"
        out.append(item)
    return out


def preview(inputs: list[dict[str, Any]], output: list[dict[str, Any]], n: int = 80) -> str:
    """A short line for listings: the last input, then the start of the answer."""
    typed_in = [i for i in _typed(inputs) if not isinstance(i, ReasoningItem)]
    typed_out = [i for i in _typed(output) if isinstance(i, MessageItem)]
    last_in = _item_text(typed_in[-1]) if typed_in else ""
    out = _item_text(typed_out[0]) if typed_out else ""
    return (last_in[: n // 2] + " → " + out)[:n]


def _typed(items: list[dict[str, Any]]) -> list[Any]:
    """Stored items through the typed models (none, should a stored item not validate)."""
    try:
        return list(STORED_ITEMS.validate_python(items))
    except ValidationError:
        return []


def _item_text(item: Any) -> str:
    """An item's text for a preview: its text and refusal parts, or a call's name or output."""
    if isinstance(item, MessageItem):
        return _parts_text(item.content)
    if isinstance(item, FunctionCallItem):
        return item.name
    if isinstance(item, FunctionCallOutputItem):
        return _parts_text(item.output)
    return ""


def _parts_text(content: str | list[Any]) -> str:
    if isinstance(content, str):
        return content
    texts = [
        p.text if isinstance(p, TextPart) else p.refusal if isinstance(p, RefusalPart) else ""
        for p in content
    ]
    return "".join(texts)

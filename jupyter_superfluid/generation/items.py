"""Responses-style input items and tools → neutral chat messages and tool specs.

Shared by the OpenAI Responses API and LMSP, whose items have the same shapes.

Output items are valid input items, so every shape this server emits is
accepted back unchanged (extra fields such as ``id`` and ``status`` are ignored).
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from ..chat.types import ChatMessage, MediaInput, OutputFormat, ToolCall, ToolChoice, ToolSpec
from ..errors import APIError, InvalidRequest, UnsupportedParameter
from .media import MEDIA_MARKER, audio_part, image_url_part

ROLES = {"user": "user", "system": "system", "developer": "system", "assistant": "assistant"}
BUILTIN_TOOLS = {
    "web_search",
    "web_search_preview",
    "web_search_2025_08_26",
    "file_search",
    "computer",
    "computer_use",
    "computer_use_preview",
    "code_interpreter",
    "image_generation",
    "mcp",
    "custom",
    "local_shell",
    "shell",
    "apply_patch",
    "tool_search",
}


class UnsupportedTool(APIError):
    """A built-in tool this server does not run (400 ``unsupported_tool``)."""

    code = "unsupported_tool"


def normalize_input(raw: str | list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The input as a list of items (a string is one user message)."""
    if isinstance(raw, str):
        return [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": raw}]}
        ]
    return list(raw)


def part_text(part: Any, param: str) -> str:
    """The text of one content part, or a 400 saying why it cannot be used."""
    kind = part.get("type") if isinstance(part, dict) else None
    if kind in ("input_text", "output_text", "text", "summary_text", "reasoning_text"):
        text = part.get("text")
        if not isinstance(text, str):
            raise InvalidRequest(f"{param}.text must be a string", param=f"{param}.text")
        return text
    if kind == "refusal":
        return str(part.get("refusal") or "")
    if kind in ("input_image", "input_audio"):
        part_media(part, param)  # the part's own errors first
        raise InvalidRequest(
            f"{param}: images and audio are accepted in message content only",
            param=param,
            code="unsupported_input",
        )
    if kind == "input_file":
        raise UnsupportedParameter("input_file parts are not supported", param=param)
    raise InvalidRequest(f"{param}: unknown content part type {kind!r}", param=f"{param}.type")


def part_media(part: dict[str, Any], param: str) -> MediaInput:
    """An ``input_image`` (data: URL) or ``input_audio`` part as a neutral medium."""
    if part.get("type") == "input_audio":
        return audio_part(part, param)
    if part.get("file_id"):
        raise UnsupportedParameter("input_image by file_id is not supported", param=param)
    return image_url_part(part.get("image_url"), param, f"{param}.image_url")


def content_text(content: Any, param: str) -> str:
    """A text-only content: a string or a list of text parts."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise InvalidRequest(f"{param} must be a string or an array of parts", param=param)
    return "".join(part_text(p, f"{param}[{j}]") for j, p in enumerate(content))


def message_content(content: Any, param: str) -> tuple[str, tuple[MediaInput, ...]]:
    """A message's content and media: text parts joined, each medium as MEDIA_MARKER."""
    if not isinstance(content, list):
        return content_text(content, param), ()
    texts: list[str] = []
    media: list[MediaInput] = []
    for j, part in enumerate(content):
        if isinstance(part, dict) and part.get("type") in ("input_image", "input_audio"):
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


def to_messages(items: list[dict[str, Any]], param: str = "input") -> tuple[ChatMessage, ...]:
    """Neutral messages for a list of Responses input (or output) items."""
    turns = _Turns()
    for i, item in enumerate(items):
        at = f"{param}[{i}]"
        if not isinstance(item, dict):
            raise InvalidRequest(f"{at} must be an object", param=at)
        kind = item.get("type", "message" if "role" in item else None)
        if kind == "message":
            role = ROLES.get(item.get("role"))  # type: ignore[arg-type]
            if role is None:
                raise InvalidRequest(
                    f"{at}.role must be user, system, developer or assistant", param=f"{at}.role"
                )
            text, media = message_content(item.get("content", ""), f"{at}.content")
            turns.add(ChatMessage(role, text, media=media))  # type: ignore[arg-type]
        elif kind == "function_call":
            turns.add_call(_call(item, at))
        elif kind == "function_call_output":
            call_id = _string(item, "call_id", at)
            output = item.get("output", "")
            text = output if isinstance(output, str) else content_text(output, f"{at}.output")
            turns.add(ChatMessage("tool", text, tool_call_id=call_id))
        elif kind == "reasoning":
            turns.reasoning = (turns.reasoning or "") + _reasoning_text(item, at)
        elif kind == "item_reference":
            raise UnsupportedParameter("item_reference items are not supported", param=at)
        else:
            raise InvalidRequest(
                f"{at}.type {kind!r} is not a supported input item", param=f"{at}.type"
            )
    return tuple(turns.messages)


def _string(item: dict[str, Any], key: str, at: str) -> str:
    value = item.get(key)
    if not isinstance(value, str) or not value:
        raise InvalidRequest(f"{at}.{key} must be a non-empty string", param=f"{at}.{key}")
    return value


def _call(item: dict[str, Any], at: str) -> ToolCall:
    args = item.get("arguments", "{}")
    if not isinstance(args, str):
        raise InvalidRequest(f"{at}.arguments must be a JSON string", param=f"{at}.arguments")
    namespace = item.get("namespace")
    return ToolCall(
        call_id=_string(item, "call_id", at),
        name=_string(item, "name", at),
        arguments=args,
        namespace=namespace if isinstance(namespace, str) else None,
    )


def _reasoning_text(item: dict[str, Any], at: str) -> str:
    parts = item.get("content") or item.get("summary") or []
    if not isinstance(parts, list):
        raise InvalidRequest(f"{at}.content must be an array", param=f"{at}.content")
    return "".join(part_text(p, f"{at}.content[{j}]") for j, p in enumerate(parts))


def to_tools(raw: list[dict[str, Any]]) -> tuple[ToolSpec, ...]:
    """Function and namespace tools as neutral specs; built-in tools are refused."""
    specs: list[ToolSpec] = []
    for i, tool in enumerate(raw):
        at = f"tools[{i}]"
        kind = tool.get("type") if isinstance(tool, dict) else None
        if kind == "function":
            specs.append(_function(tool, at, None))
        elif kind == "namespace":
            ns = _string(tool, "name", at)
            members = tool.get("tools")
            if not isinstance(members, list) or not members:
                raise InvalidRequest(f"{at}.tools must list function tools", param=f"{at}.tools")
            for j, member in enumerate(members):
                if not isinstance(member, dict) or member.get("type") != "function":
                    raise UnsupportedTool(
                        f"{at}.tools[{j}]: only function tools can be namespace members",
                        param=f"{at}.tools[{j}].type",
                    )
                specs.append(_function(member, f"{at}.tools[{j}]", ns))
        elif kind in BUILTIN_TOOLS or isinstance(kind, str):
            raise UnsupportedTool(
                f"built-in tool {kind!r} is not supported; only function and namespace tools",
                param=f"{at}.type",
            )
        else:
            raise InvalidRequest(f"{at}.type is required", param=f"{at}.type")
    names = [s.qualified_name for s in specs]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise InvalidRequest(f"duplicate tool names: {sorted(dup)}", param="tools")
    return tuple(specs)


def _function(tool: dict[str, Any], at: str, namespace: str | None) -> ToolSpec:
    params = tool.get("parameters")
    if params is not None and not isinstance(params, dict):
        raise InvalidRequest(
            f"{at}.parameters must be a JSON schema object", param=f"{at}.parameters"
        )
    desc = tool.get("description")
    return ToolSpec(
        _string(tool, "name", at), desc if isinstance(desc, str) else None, params, namespace
    )


def to_tool_choice(raw: Any, tools: tuple[ToolSpec, ...]) -> ToolChoice:
    """auto, none, required, or a named function tool."""
    if raw in ("auto", "none", "required"):
        if raw == "required" and not tools:
            raise InvalidRequest("tool_choice 'required' needs tools", param="tool_choice")
        return ToolChoice(raw)
    if not isinstance(raw, dict) or raw.get("type") != "function":
        raise UnsupportedParameter(
            'tool_choice must be auto, none, required or {"type": "function", "name": ...}',
            param="tool_choice",
        )
    name = raw.get("name")
    if isinstance(raw.get("namespace"), str):
        name = f"{raw['namespace']}.{name}"
    matches = [t for t in tools if name in (t.qualified_name, t.name)]
    if len(matches) != 1:
        raise InvalidRequest(
            f"tool_choice names {name!r}, which is not one of the tools", param="tool_choice.name"
        )
    return ToolChoice("function", matches[0].qualified_name)


def to_output_format(text: Any) -> OutputFormat:
    """``text.format`` as a neutral output format."""
    fmt = (text or {}).get("format") if isinstance(text, dict) else None
    if fmt is None:
        return OutputFormat()
    kind = fmt.get("type") if isinstance(fmt, dict) else None
    if kind == "text":
        return OutputFormat()
    if kind == "json_object":
        return OutputFormat("json_object")
    if kind == "json_schema":
        schema = fmt.get("schema")
        if not isinstance(schema, dict):
            raise InvalidRequest(
                "text.format.schema must be a JSON schema object", param="text.format.schema"
            )
        try:
            json.dumps(schema)
        except (TypeError, ValueError) as err:
            raise InvalidRequest(f"text.format.schema: {err}", param="text.format.schema") from err
        return OutputFormat("json_schema", schema, fmt.get("name"), param="text.format.schema")
    raise InvalidRequest(
        "text.format.type must be text, json_object or json_schema", param="text.format.type"
    )


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

    def text(item: dict[str, Any]) -> str:
        content = item.get("content")
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            return "".join(p.get("text", "") for p in content if isinstance(p, dict))
        return str(item.get("name") or item.get("output") or "")

    last_in = next((text(i) for i in reversed(inputs) if i.get("type") != "reasoning"), "")
    out = next((text(i) for i in output if i.get("type") == "message"), "")
    return (last_in[: n // 2] + " → " + out)[:n]

"""Responses-style input items and tools: typed models, and their neutral messages and specs.

Shared by the OpenAI Responses API and LMSP, whose items have the same shapes,
and by the store (continuing a conversation reads its stored items back through
the same models). Output items are valid input items, so every shape this
server emits is accepted back unchanged (extra fields such as ``id`` and
``status`` are kept and ignored). The models check shapes and types (a
validation error names the field, ``input[2].content[0].text``); turning them
into ``ChatMessage`` values checks what only the content can tell (media).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, TypeAdapter, ValidationError

from ..chat.types import ChatMessage, MediaInput, OutputFormat, ToolCall, ToolChoice, ToolSpec
from ..errors import APIError, InvalidRequest, UnsupportedParameter
from ..validation import check_schema, invalid, parse
from .media import MEDIA_MARKER, audio_part, image_url_part

ROLES = {"user": "user", "system": "system", "developer": "system", "assistant": "assistant"}
MAX_ITEMS = 4096  # input items of one request
MAX_PARTS = 1024  # content parts of one item
MAX_TOOLS = 256
NAME = r"^[A-Za-z0-9_.:-]{1,128}$"  # function, namespace and call names


class UnsupportedTool(APIError):
    """A built-in tool this server does not run (400 ``unsupported_tool``)."""

    code = "unsupported_tool"


class Wire(BaseModel):
    """Base of the wire models: strict types, unknown fields kept (and ignored)."""

    model_config = ConfigDict(strict=True, extra="allow")


# -- content parts ---------------------------------------------------------------------


class TextPart(Wire):
    """A text part: input, output, summary or reasoning text."""

    type: Literal["input_text", "output_text", "text", "summary_text", "reasoning_text"]
    text: str


class RefusalPart(Wire):
    """A refusal, sent back as text."""

    type: Literal["refusal"]
    refusal: str = ""


class ImagePart(Wire):
    """An image: a data: URL (``image_url``); ``file_id`` is refused."""

    type: Literal["input_image"]
    image_url: str | None = None
    file_id: str | None = None
    detail: Literal["auto", "low", "high"] | None = None


class AudioData(Wire):
    """``{"data": base64, "format": "wav" | "mp3"}``."""

    data: str
    format: Literal["wav", "mp3"] | None = None


class AudioPart(Wire):
    """An audio clip, as on chat completions."""

    type: Literal["input_audio"]
    input_audio: AudioData


class FilePart(Wire):
    """A file part: refused (``unsupported_parameter``)."""

    type: Literal["input_file"]


ContentPart = Annotated[
    TextPart | RefusalPart | ImagePart | AudioPart | FilePart, Field(discriminator="type")
]
Content = str | Annotated[list[ContentPart], Field(max_length=MAX_PARTS)]


# -- items -----------------------------------------------------------------------------


class MessageItem(Wire):
    """A chat message; ``type`` may be left out (``{"role", "content"}``)."""

    type: Literal["message"] = "message"
    role: Literal["user", "system", "developer", "assistant"]
    content: Content


class FunctionCallItem(Wire):
    """A prior function call (``namespace`` for a namespace tool's member)."""

    type: Literal["function_call"]
    call_id: str = Field(min_length=1, max_length=256)
    name: str = Field(pattern=NAME)
    arguments: str
    namespace: str | None = Field(default=None, pattern=NAME)


class FunctionCallOutputItem(Wire):
    """A function call's result: a string or text parts."""

    type: Literal["function_call_output"]
    call_id: str = Field(min_length=1, max_length=256)
    output: Content


class ReasoningItem(Wire):
    """Prior reasoning (content or summary text), joined to the assistant turn after it."""

    type: Literal["reasoning"]
    content: Annotated[list[ContentPart], Field(max_length=MAX_PARTS)] | None = None
    summary: Annotated[list[ContentPart], Field(max_length=MAX_PARTS)] = []


class ItemReference(Wire):
    """A reference to a stored item: refused (``unsupported_parameter``)."""

    type: Literal["item_reference"]


def _item_tag(value: Any) -> str | None:
    if isinstance(value, dict):
        kind = value.get("type", "message")
        return kind if isinstance(kind, str) else None
    return getattr(value, "type", None)


InputItem = Annotated[
    Annotated[MessageItem, Tag("message")]
    | Annotated[FunctionCallItem, Tag("function_call")]
    | Annotated[FunctionCallOutputItem, Tag("function_call_output")]
    | Annotated[ReasoningItem, Tag("reasoning")]
    | Annotated[ItemReference, Tag("item_reference")],
    Discriminator(_item_tag),
]
InputItems = Annotated[list[InputItem], Field(max_length=MAX_ITEMS)]
STORED_ITEMS: TypeAdapter[list[Any]] = TypeAdapter(list[InputItem])


# -- tools -----------------------------------------------------------------------------


class FunctionTool(Wire):
    """A function tool: ``{type, name, description?, parameters?, strict?}``."""

    type: Literal["function"]
    name: str = Field(pattern=NAME)
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class NamespaceTool(Wire):
    """A group of function tools the model sees as ``namespace.member``."""

    type: Literal["namespace"]
    name: str = Field(pattern=NAME)
    description: str | None = None
    tools: list[Any] = Field(min_length=1, max_length=MAX_TOOLS)


class BuiltinTool(Wire):
    """Any other tool type (web_search, mcp, ...): refused (``unsupported_tool``)."""

    type: str


def _tool_tag(value: Any) -> str | None:
    kind = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    if not isinstance(kind, str):
        return None
    return kind if kind in ("function", "namespace") else "builtin"


Tool = Annotated[
    Annotated[FunctionTool, Tag("function")]
    | Annotated[NamespaceTool, Tag("namespace")]
    | Annotated[BuiltinTool, Tag("builtin")],
    Discriminator(_tool_tag),
]
Tools = Annotated[list[Tool], Field(max_length=MAX_TOOLS)]


class FunctionChoice(Wire):
    """``{"type": "function", "name": ..., "namespace"?}``."""

    type: Literal["function"]
    name: str = Field(pattern=NAME)
    namespace: str | None = Field(default=None, pattern=NAME)


class OtherChoice(Wire):
    """Any other tool choice object: refused (``unsupported_parameter``)."""

    type: str


def _choice_tag(value: Any) -> str | None:
    if isinstance(value, str):
        return "mode"
    kind = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    if not isinstance(kind, str):
        return None
    return "function" if kind == "function" else "other"


ToolChoiceParam = Annotated[
    Annotated[Literal["auto", "none", "required"], Tag("mode")]
    | Annotated[FunctionChoice, Tag("function")]
    | Annotated[OtherChoice, Tag("other")],
    Discriminator(_choice_tag),
]


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
    raise UnsupportedParameter("input_file parts are not supported", param=param)


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


def to_messages(items: Sequence[Any], param: str = "input") -> tuple[ChatMessage, ...]:
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


def messages_of(items: Sequence[Any], param: str = "input") -> tuple[ChatMessage, ...]:
    """Neutral messages of items already checked as JSON (a protocol's, or stored ones)."""
    try:
        typed = STORED_ITEMS.validate_python(list(items))
    except ValidationError as err:
        raise invalid(err, list(items), param) from err
    return to_messages(typed, param)


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

"""Responses-style wire models: input items, content parts, tools and tool choices.

Typed (pydantic, strict types) and shared by the OpenAI Responses API and LMSP,
whose items have the same shapes, and by the store, whose items are read back
through them. Unknown fields are kept and ignored (output items, with their
``id`` and ``status``, are valid input items); unknown item, part or tool types
and wrong types are validation errors that name the field.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, TypeAdapter

MAX_ITEMS = 4096  # input items of one request
MAX_PARTS = 1024  # content parts of one item
MAX_TOOLS = 256
NAME = r"^[A-Za-z0-9_.:-]{1,128}$"  # function, namespace and call names


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
    """A file: ``file_data`` (base64 or a data: URL) and a ``filename``; by id or URL refused."""

    type: Literal["input_file"]
    file_data: str | None = None
    filename: str | None = Field(default=None, max_length=1024)
    file_id: str | None = None
    file_url: str | None = None


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

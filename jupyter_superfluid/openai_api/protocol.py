"""Request shapes of the OpenAI endpoints: typed wire models (pydantic, strict types).

Unknown fields are accepted and ignored (clients send what OpenAI accepts);
wrong types, out-of-range values and unknown item or part types become a 400
naming the field. Responses-style items and tools are the shared models of
``generation.items``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, Strict

from jupyter_superfluid.generation.wire import (
    NAME,
    AudioData,
    InputItems,
    ToolChoiceParam,
    Tools,
    Wire,
)
from jupyter_superfluid.validation import parse

__all__ = ["parse"]

Temperature = Annotated[float, Field(ge=0, le=2)]
TopP = Annotated[float, Field(ge=0, le=1)]
Penalty = Annotated[float, Field(ge=-2, le=2)]
Seed = Annotated[int, Field(ge=-(2**63), le=2**64 - 1)]
TokenCount = Annotated[int, Field(ge=1, le=2**31 - 1)]
LogitBias = Annotated[
    dict[
        Annotated[int, Strict(False), Field(ge=0, le=2**31 - 1)],
        Annotated[float, Field(ge=-100, le=100)],
    ],
    Field(max_length=1024),
]
Text = Annotated[str, Field(max_length=1 << 24)]
Metadata = Annotated[
    dict[Annotated[str, Field(max_length=64)], Annotated[str, Field(max_length=512)]],
    Field(max_length=16),
]


class JsonSchemaSpec(Wire):
    """``{name, schema, strict, description}`` of a json_schema format."""

    name: str = Field(default="response", min_length=1, max_length=64)
    schema_: dict[str, Any] = Field(alias="schema")
    strict: bool | None = None
    description: str | None = None


class TextFormatText(Wire):
    """``{"type": "text"}``."""

    type: Literal["text"]


class TextFormatJsonObject(Wire):
    """``{"type": "json_object"}``."""

    type: Literal["json_object"]


class TextFormatJsonSchema(JsonSchemaSpec):
    """Responses' ``{"type": "json_schema", "name", "schema", "strict"?}``."""

    type: Literal["json_schema"]


TextFormat = Annotated[
    TextFormatText | TextFormatJsonObject | TextFormatJsonSchema, Field(discriminator="type")
]


class TextConfig(Wire):
    """Responses' ``text``: its ``format`` (and ``verbosity``, ignored)."""

    format: TextFormat | None = None
    verbosity: Literal["low", "medium", "high"] | None = None


class ReasoningConfig(Wire):
    """Responses' ``reasoning``: its ``effort``."""

    effort: Literal["none", "minimal", "low", "medium", "high", "xhigh"] | None = None
    summary: Literal["auto", "concise", "detailed"] | None = None


class ResponseCreateRequest(Wire):
    """``POST /v1/responses``."""

    model: str | None = Field(default=None, min_length=1, max_length=512)
    input: Text | InputItems
    instructions: Text | None = None
    previous_response_id: str | None = Field(default=None, min_length=1, max_length=256)
    store: bool = True
    stream: bool = False
    background: bool | None = None
    tools: Tools = Field(default_factory=list)
    tool_choice: ToolChoiceParam = "auto"
    text: TextConfig | None = None
    max_output_tokens: TokenCount | None = None
    max_tool_calls: TokenCount | None = None
    temperature: Temperature | None = None
    top_p: TopP | None = None
    presence_penalty: Penalty | None = None
    frequency_penalty: Penalty | None = None
    top_logprobs: Annotated[int, Field(ge=0, le=20)] | None = None
    seed: Seed | None = None
    reasoning: ReasoningConfig | None = None
    metadata: Metadata | None = None
    parallel_tool_calls: bool = True
    truncation: Literal["auto", "disabled"] = "disabled"
    include: list[str] | None = None
    user: str | None = Field(default=None, max_length=512)
    safety_identifier: str | None = Field(default=None, max_length=512)
    prompt_cache_key: str | None = Field(default=None, max_length=512)
    service_tier: Literal["auto", "default", "flex", "priority", "scale"] | None = None
    stream_options: dict[str, Any] | None = None
    conversation: Any = None
    # An extension: in a conversation, start a new branch from its root (no previous turn).
    branch_from_root: bool = False
    prompt: Any = None
    logit_bias: LogitBias | None = None  # an extension, as on chat completions


# -- chat completions ------------------------------------------------------------------


class ChatTextPart(Wire):
    """A text part of a chat message."""

    type: Literal["text", "input_text", "output_text"]
    text: str


class ImageURL(Wire):
    """``{"url": ..., "detail"?}``."""

    url: str
    detail: Literal["auto", "low", "high"] | None = None


class ChatImagePart(Wire):
    """An image by URL (a data: URL; remote URLs are refused)."""

    type: Literal["image_url"]
    image_url: ImageURL | str


class ChatAudioPart(Wire):
    """``{"type": "input_audio", "input_audio": {"data", "format"}}``."""

    type: Literal["input_audio"]
    input_audio: AudioData


class ChatFilePart(Wire):
    """A file part: refused (``unsupported_input``)."""

    type: Literal["file", "input_file"]


ChatPart = Annotated[
    ChatTextPart | ChatImagePart | ChatAudioPart | ChatFilePart, Field(discriminator="type")
]


class CalledFunction(Wire):
    """The function of a prior tool call; arguments a JSON string (or object)."""

    name: str = Field(pattern=NAME)
    arguments: str | dict[str, Any] = "{}"


class ChatToolCall(Wire):
    """A prior tool call of an assistant message."""

    id: str = Field(default="", max_length=256)
    type: Literal["function"] = "function"
    function: CalledFunction


class ChatMessageParam(Wire):
    """One chat-completions message."""

    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: Text | Annotated[list[ChatPart], Field(max_length=1024)] | None = None
    name: str | None = Field(default=None, max_length=256)
    tool_calls: Annotated[list[ChatToolCall], Field(max_length=256)] | None = None
    tool_call_id: str | None = Field(default=None, max_length=256)
    reasoning_content: str | None = None


class FunctionDef(Wire):
    """A chat-completions function definition."""

    name: str = Field(pattern=NAME)
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class ChatTool(Wire):
    """A chat-completions tool."""

    type: Literal["function"]
    function: FunctionDef


class NamedFunction(Wire):
    """``{"name": ...}``."""

    name: str = Field(max_length=256)


class ChatNamedChoice(Wire):
    """``{"type": "function", "function": {"name": ...}}``."""

    type: Literal["function"]
    function: NamedFunction


class ResponseFormatText(Wire):
    """``{"type": "text"}``."""

    type: Literal["text"]


class ResponseFormatJsonObject(Wire):
    """``{"type": "json_object"}``."""

    type: Literal["json_object"]


class ResponseFormatJsonSchema(Wire):
    """``{"type": "json_schema", "json_schema": {name, schema, strict}}``."""

    type: Literal["json_schema"]
    json_schema: JsonSchemaSpec


ResponseFormat = Annotated[
    ResponseFormatText | ResponseFormatJsonObject | ResponseFormatJsonSchema,
    Field(discriminator="type"),
]


class ChatCompletionRequest(Wire):
    """``POST /v1/chat/completions``."""

    model: str = Field(min_length=1, max_length=512)
    messages: Annotated[list[ChatMessageParam], Field(min_length=1, max_length=4096)]
    temperature: Temperature | None = None
    top_p: TopP | None = None
    seed: Seed | None = None
    max_tokens: TokenCount | None = None
    max_completion_tokens: TokenCount | None = None
    stop: str | Annotated[list[str], Field(max_length=4)] | None = None
    stream: bool = False
    stream_options: dict[str, Any] | None = None
    tools: Annotated[list[ChatTool], Field(max_length=256)] | None = None
    tool_choice: Literal["auto", "none", "required"] | ChatNamedChoice | None = None
    response_format: ResponseFormat | None = None
    n: int = Field(default=1, ge=1, le=1)
    reasoning_effort: Literal["none", "minimal", "low", "medium", "high", "xhigh"] | None = None
    logit_bias: LogitBias | None = None
    presence_penalty: Penalty | None = None
    frequency_penalty: Penalty | None = None
    user: str | None = Field(default=None, max_length=512)


class ListQuery(Wire):
    """``limit``, ``order`` and ``after`` of a list endpoint (query strings, so not strict)."""

    model_config = Wire.model_config | {"strict": False, "extra": "ignore"}

    limit: int = Field(default=20, ge=1, le=100)
    order: Literal["asc", "desc"] = "desc"
    after: str | None = Field(default=None, max_length=256)

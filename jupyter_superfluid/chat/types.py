"""The neutral chat request and the neutral event stream every protocol shares.

Every wire format (chat completions, Responses, LMSP) is translated into a
``ChatRequest``; generation produces ``ChatEvent`` values; each protocol only
serializes them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Role = Literal["system", "user", "assistant", "tool"]
MediaKind = Literal["image", "audio"]
ItemKind = Literal["reasoning", "message", "function_call"]
FinalStatus = Literal["completed", "incomplete", "failed", "cancelled"]


@dataclass(frozen=True)
class ToolCall:
    """A function call made by the assistant (arguments as a JSON string)."""

    call_id: str
    name: str
    arguments: str
    namespace: str | None = None

    @property
    def qualified_name(self) -> str:
        """The name the model sees: ``namespace.member`` or ``name``."""
        return f"{self.namespace}.{self.name}" if self.namespace else self.name


@dataclass(frozen=True)
class MediaInput:
    """An image or audio clip of a message: its decoded bytes and the request path it came from."""

    kind: MediaKind
    data: bytes = field(repr=False)
    param: str  # e.g. ``input[0].content[1]``, for error messages


@dataclass(frozen=True)
class ChatMessage:
    """One chat turn; tool results use role ``tool`` with ``tool_call_id``.

    ``content`` holds one ``engine.base.MEDIA_MARKER`` where each of ``media`` goes.
    """

    role: Role
    content: str = ""
    reasoning: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    media: tuple[MediaInput, ...] = ()


@dataclass(frozen=True)
class ToolSpec:
    """A function tool; ``namespace`` set for a member of a namespace tool."""

    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None
    namespace: str | None = None

    @property
    def qualified_name(self) -> str:
        """The name the model sees: ``namespace.member`` or ``name``."""
        return f"{self.namespace}.{self.name}" if self.namespace else self.name


@dataclass(frozen=True)
class ToolChoice:
    """``auto``, ``none``, ``required``, or a named function (``mode == "function"``)."""

    mode: Literal["auto", "none", "required", "function"] = "auto"
    name: str | None = None  # qualified name when mode == "function"


@dataclass(frozen=True)
class OutputFormat:
    """Plain text, any JSON object, or JSON matching ``schema``."""

    type: Literal["text", "json_object", "json_schema"] = "text"
    schema: dict[str, Any] | None = None
    name: str | None = None
    param: str = "response_format"  # where the request carried it, for error messages


@dataclass(frozen=True)
class ChatSampling:
    """Sampling as a protocol asked for it; None means the model's default."""

    temperature: float | None = None
    top_p: float | None = None
    seed: int | None = None
    max_tokens: int | None = None
    stop: tuple[str, ...] = ()
    logit_bias: tuple[tuple[int, float], ...] = ()  # (token id, bias); -100 bans a token


@dataclass(frozen=True)
class ChatRequest:
    """One protocol-neutral chat request."""

    model: str
    messages: tuple[ChatMessage, ...]
    tools: tuple[ToolSpec, ...] = ()
    tool_choice: ToolChoice = field(default_factory=ToolChoice)
    output_format: OutputFormat = field(default_factory=OutputFormat)
    sampling: ChatSampling = field(default_factory=ChatSampling)
    reasoning_effort: str | None = None
    instructions: str | None = None  # a system message leading the whole conversation


@dataclass(frozen=True)
class Usage:
    """Token accounting, as counted by the engine."""

    input_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True)
class ItemStarted:
    """An output item opens at ``index`` (reasoning, message or function_call)."""

    index: int
    kind: ItemKind
    call_id: str | None = None
    name: str | None = None
    namespace: str | None = None


@dataclass(frozen=True)
class TextDelta:
    """Text appended to the open item at ``index`` (message text, reasoning or arguments)."""

    index: int
    kind: ItemKind
    text: str


@dataclass(frozen=True)
class OutputItem:
    """A finished output item."""

    kind: ItemKind
    text: str = ""
    call_id: str | None = None
    name: str | None = None
    namespace: str | None = None
    complete: bool = True  # False when cut by the token cap


@dataclass(frozen=True)
class ItemDone:
    """The item at ``index`` is complete."""

    index: int
    item: OutputItem


@dataclass(frozen=True)
class Finished:
    """Last event: the generation's final status and its usage."""

    status: FinalStatus
    usage: Usage
    reason: str | None = None  # e.g. "max_output_tokens", or an error message
    code: str | None = None  # failed: the engine's machine code (e.g. "engine_crashed")


@dataclass(frozen=True)
class PromptProcessed:
    """First event: the prompt is evaluated; how much of it the prefix cache served."""

    prompt_tokens: int
    cached_tokens: int


ChatEvent = PromptProcessed | ItemStarted | TextDelta | ItemDone | Finished

"""Request shapes of the OpenAI endpoints, validated with pydantic.

Unknown fields are accepted and ignored (clients send what OpenAI accepts);
wrong types and out-of-range values become a 400 naming the field.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..web.validation import field_path, parse

__all__ = ["field_path", "parse"]  # re-exported: the OpenAI services import them here


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="allow")


Temperature = Field(default=None, ge=0, le=2)
TopP = Field(default=None, ge=0, le=1)


class FunctionDef(_Lenient):
    """A chat-completions function definition."""

    name: str = Field(min_length=1, max_length=128)
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class ChatTool(_Lenient):
    """A chat-completions tool."""

    type: Literal["function"]
    function: FunctionDef


class JsonSchemaFormat(_Lenient):
    """``{name, schema, strict}`` of a json_schema format."""

    name: str = Field(default="response", max_length=64)
    schema_: dict[str, Any] = Field(default_factory=dict, alias="schema")
    strict: bool | None = None
    description: str | None = None


class ResponseFormat(_Lenient):
    """Chat completions' ``response_format``."""

    type: Literal["text", "json_object", "json_schema"]
    json_schema: JsonSchemaFormat | None = None


class ChatCompletionRequest(_Lenient):
    """``POST /v1/chat/completions``."""

    model: str = Field(min_length=1)
    messages: list[dict[str, Any]] = Field(min_length=1)
    temperature: float | None = Temperature
    top_p: float | None = TopP
    seed: int | None = None
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    stop: str | list[str] | None = None
    stream: bool = False
    stream_options: dict[str, Any] | None = None
    tools: list[ChatTool] | None = None
    tool_choice: str | dict[str, Any] | None = None
    response_format: ResponseFormat | None = None
    n: int = Field(default=1, ge=1, le=1)
    reasoning_effort: str | None = None
    logit_bias: dict[int, float] | None = None


class TextConfig(_Lenient):
    """Responses' ``text``: its ``format``."""

    format: dict[str, Any] | None = None


class ReasoningConfig(_Lenient):
    """Responses' ``reasoning``: its ``effort``."""

    effort: Literal["none", "minimal", "low", "medium", "high", "xhigh"] | None = None
    summary: str | None = None


class ResponseCreateRequest(_Lenient):
    """``POST /v1/responses``."""

    model: str | None = Field(default=None, min_length=1)
    input: str | list[dict[str, Any]]
    instructions: str | None = None
    previous_response_id: str | None = None
    store: bool = True
    stream: bool = False
    background: bool | None = None
    tools: list[dict[str, Any]] = Field(default_factory=list)
    tool_choice: str | dict[str, Any] = "auto"
    text: TextConfig | None = None
    max_output_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = Temperature
    top_p: float | None = TopP
    seed: int | None = None
    reasoning: ReasoningConfig | None = None
    metadata: dict[str, str] | None = Field(default=None, max_length=16)
    parallel_tool_calls: bool = True
    truncation: Literal["auto", "disabled"] = "disabled"
    conversation: Any = None
    prompt: Any = None
    logit_bias: dict[int, float] | None = None  # an extension, as on chat completions


class ListQuery(BaseModel):
    """``limit``, ``order`` and ``after`` of a list endpoint."""

    limit: int = Field(default=20, ge=1, le=100)
    order: Literal["asc", "desc"] = "desc"
    after: str | None = None

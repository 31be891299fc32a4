"""LMSP 1.0 request shapes (section 6.1), validated with pydantic.

Validation is strict about types (a string is not a number here), names the
field at fault in every 400, and ignores unknown top-level fields so that a
later minor version's fields do not break this service. Input items are
validated one by one, so that ``param`` reads ``input[2].content[0].text``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..errors import InvalidRequest, UnsupportedCapability
from ..web.validation import parse
from .problems import UnsupportedExtension, UnsupportedVersion

VERSION = "1.0"
EXTENSION = "superfluid"  # the name of this service's own request extension
SUPPORTED_VERSIONS = (VERSION,)
# Content types LMSP 1.0 reserves for later versions (text only for now).
RESERVED_PARTS = frozenset({"input_image", "input_audio", "input_file"})


class _Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")


class _Open(BaseModel):
    model_config = ConfigDict(strict=True, extra="allow")


class TextPart(_Open):
    """A text content part (``output_text`` when an assistant turn is sent back)."""

    type: Literal["input_text", "output_text"]
    text: str


class MessageItem(_Open):
    """A message input item; ``id`` and other output fields are accepted back."""

    type: Literal["message"] = "message"
    role: Literal["system", "user", "assistant"]
    content: list[dict[str, Any]]


class FunctionCallItem(_Open):
    """A ``function_call`` item, as the service returned it."""

    type: Literal["function_call"]
    call_id: str = Field(min_length=1)
    name: str = Field(min_length=1)
    arguments: str


class FunctionCallOutputItem(_Open):
    """The client's result of a function call."""

    type: Literal["function_call_output"]
    call_id: str = Field(min_length=1)
    output: str


class SummaryPart(_Open):
    """A ``summary_text`` part of a reasoning item."""

    type: Literal["summary_text"]
    text: str


class ReasoningItem(_Open):
    """A ``reasoning`` item, as the service returned it."""

    type: Literal["reasoning"]
    summary: list[SummaryPart]


ITEM_MODELS: dict[str, type[BaseModel]] = {
    "message": MessageItem,
    "function_call": FunctionCallItem,
    "function_call_output": FunctionCallOutputItem,
    "reasoning": ReasoningItem,
}


class LmspFunctionTool(_Open):
    """A function tool the client executes (section 6.5)."""

    type: Literal["function"]
    name: str = Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.-]+$")
    description: str | None = None
    parameters: dict[str, Any] | None = None


class LmspToolChoice(_Strict):
    """``{"type": "function", "name": ...}``."""

    type: Literal["function"]
    name: str = Field(min_length=1)


class LmspJsonSchema(_Open):
    """``{"name": ..., "schema": {...}}`` of a json_schema response format."""

    name: str = Field(min_length=1, max_length=64)
    schema_: dict[str, Any] = Field(alias="schema")
    description: str | None = None
    strict: bool | None = None


class LmspResponseFormat(_Strict):
    """``{"type": "text"}`` or ``{"type": "json_schema", "json_schema": {...}}``."""

    type: Literal["text", "json_schema"]
    json_schema: LmspJsonSchema | None = None


class SuperfluidExtension(_Strict):
    """This service's own extension (``extensions.superfluid``): sampling extras."""

    critical: bool = False
    seed: int | None = None
    top_p: float | None = Field(default=None, ge=0, le=1)
    stop: list[str] = Field(default_factory=list, max_length=4)
    logit_bias: dict[str, float] | None = None
    reasoning_effort: Literal["none", "minimal", "low", "medium", "high"] | None = None


class LmspCreateRequest(_Open):
    """``POST /lmsp/v1/responses`` (and the body of ``POST /lmsp/v1/tasks``)."""

    model: str = Field(min_length=1)
    input: list[dict[str, Any]] = Field(min_length=1)
    stream: bool = False
    max_output_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0, le=2)
    response_format: LmspResponseFormat | None = None
    tools: list[LmspFunctionTool] = Field(default_factory=list)
    tool_choice: Literal["auto", "none", "required"] | LmspToolChoice = "auto"
    store: bool = False
    previous_response_id: str | None = Field(default=None, min_length=1)
    extensions: dict[str, dict[str, Any]] = Field(default_factory=dict)


def parse_request(body: dict[str, Any]) -> LmspCreateRequest:
    """Validate a responses request, its input items and their content parts."""
    req = parse(LmspCreateRequest, body)
    for i, item in enumerate(req.input):
        check_item(item, f"input[{i}]")
    fmt = req.response_format
    if fmt is not None and fmt.type == "json_schema" and fmt.json_schema is None:
        raise InvalidRequest(
            "response_format.json_schema is required for type json_schema",
            param="response_format.json_schema",
        )
    return req


def check_item(item: dict[str, Any], at: str) -> None:
    """Validate one input item by its type."""
    kind = item.get("type", "message")
    model = ITEM_MODELS.get(kind) if isinstance(kind, str) else None
    if model is None:
        raise InvalidRequest(
            f"{at}.type must be message, function_call, function_call_output or reasoning",
            param=f"{at}.type",
        )
    parse(model, item, prefix=at)
    if kind == "message":
        for j, part in enumerate(item["content"]):
            check_part(part, f"{at}.content[{j}]")


def check_part(part: Any, at: str) -> None:
    """Validate one content part; reserved media types need a capability no model has."""
    kind = part.get("type") if isinstance(part, dict) else None
    if kind in RESERVED_PARTS:
        raise UnsupportedCapability(
            f"{kind} content is reserved for a later LMSP version; this service takes text",
            param=f"{at}.type",
        )
    parse(TextPart, part, prefix=at)


def check_version(header: str | None) -> None:
    """``LMSP-Version`` negotiation: absent means 1.0; anything else unsupported is a 400."""
    if header is None or header.strip() in SUPPORTED_VERSIONS:
        return
    raise UnsupportedVersion(
        f"LMSP-Version {header.strip()!r} is not supported; this service speaks "
        + ", ".join(SUPPORTED_VERSIONS),
        param="LMSP-Version",
    )


def superfluid_extension(req: LmspCreateRequest) -> SuperfluidExtension:
    """This service's extension from ``extensions``; a critical unknown one is a 400."""
    ours = SuperfluidExtension()
    for name, value in req.extensions.items():
        if name == EXTENSION:
            ours = parse(SuperfluidExtension, value, prefix=f"extensions.{name}")
        elif value.get("critical") is True:
            raise UnsupportedExtension(
                f"the critical extension {name!r} is not supported by this service",
                param=f"extensions.{name}",
            )
    return ours

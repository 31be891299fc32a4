"""LMSP 1.0 request shapes (section 6.1), validated with pydantic.

Validation is strict about types (a string is not a number here), names the
field at fault in every 400, and ignores unknown top-level fields so that a
later minor version's fields do not break this service. Input items are
validated one by one, so that ``param`` reads ``input[2].content[0].text``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag

from jupyter_superfluid.errors import InvalidRequest, UnsupportedCapability
from jupyter_superfluid.lmsp.problems import UnsupportedExtension, UnsupportedVersion
from jupyter_superfluid.validation import parse

VERSION = "1.0"
EXTENSION = "superfluid"  # the name of this service's own request extension
SUPPORTED_VERSIONS = (VERSION,)


class _Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")


class _Open(BaseModel):
    model_config = ConfigDict(strict=True, extra="allow")


class TextPart(_Open):
    """A text content part (``output_text`` when an assistant turn is sent back)."""

    type: Literal["input_text", "output_text"]
    text: str


class ReservedPart(_Open):
    """Image, audio and file content: reserved for a later LMSP version."""

    type: Literal["input_image", "input_audio", "input_file"]


Part = Annotated[TextPart | ReservedPart, Field(discriminator="type")]


class MessageItem(_Open):
    """A message input item; ``id`` and other output fields are accepted back."""

    type: Literal["message"] = "message"
    role: Literal["system", "user", "assistant"]
    content: Annotated[list[Part], Field(max_length=1024)]


class FunctionCallItem(_Open):
    """A ``function_call`` item, as the service returned it."""

    type: Literal["function_call"]
    call_id: str = Field(min_length=1, max_length=256)
    name: str = Field(min_length=1, max_length=128)
    arguments: str


class FunctionCallOutputItem(_Open):
    """The client's result of a function call."""

    type: Literal["function_call_output"]
    call_id: str = Field(min_length=1, max_length=256)
    output: str


class SummaryPart(_Open):
    """A ``summary_text`` part of a reasoning item."""

    type: Literal["summary_text"]
    text: str


class ReasoningItem(_Open):
    """A ``reasoning`` item, as the service returned it."""

    type: Literal["reasoning"]
    summary: Annotated[list[SummaryPart], Field(max_length=1024)]


def _item_tag(value: Any) -> str | None:
    kind = value.get("type", "message") if isinstance(value, dict) else getattr(value, "type", None)
    return kind if isinstance(kind, str) else None


InputItem = Annotated[
    Annotated[MessageItem, Tag("message")]
    | Annotated[FunctionCallItem, Tag("function_call")]
    | Annotated[FunctionCallOutputItem, Tag("function_call_output")]
    | Annotated[ReasoningItem, Tag("reasoning")],
    Discriminator(_item_tag),
]


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
    logit_bias: (
        Annotated[
            dict[
                Annotated[str, Field(pattern=r"^[0-9]{1,9}$")],
                Annotated[float, Field(ge=-100, le=100)],
            ],
            Field(max_length=1024),
        ]
        | None
    ) = None
    reasoning_effort: Literal["none", "minimal", "low", "medium", "high"] | None = None


class LmspCreateRequest(_Open):
    """``POST /lmsp/v1/responses`` (and the body of ``POST /lmsp/v1/tasks``)."""

    model: str = Field(min_length=1)
    input: Annotated[list[InputItem], Field(min_length=1, max_length=4096)]
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
        for j, part in enumerate(item.content if isinstance(item, MessageItem) else ()):
            if isinstance(part, ReservedPart):
                raise UnsupportedCapability(
                    f"{part.type} content is reserved for a later LMSP version; "
                    "this service takes text",
                    param=f"input[{i}].content[{j}].type",
                )
    fmt = req.response_format
    if fmt is not None and fmt.type == "json_schema" and fmt.json_schema is None:
        raise InvalidRequest(
            "response_format.json_schema is required for type json_schema",
            param="response_format.json_schema",
        )
    return req


def input_items(req: LmspCreateRequest) -> list[dict[str, Any]]:
    """The validated input items as JSON (what the store keeps and the chat path reads)."""
    return [item.model_dump(exclude_none=True) for item in req.input]


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

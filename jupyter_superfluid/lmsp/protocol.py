"""LMSP 1.0 request shapes (section 6.1), validated with pydantic.

Validation is strict about types (a string is not a number here), names the
field at fault in every 400, and ignores unknown top-level fields so that a
later minor version's fields do not break this service. Input items are
validated one by one, so that ``param`` reads ``input[2].content[0].text``.
They are ``generation.wire``'s item models narrowed to LMSP 1.0 (subclasses), so
the chat path reads them as validated, with no second parse.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag

from jupyter_superfluid.errors import InvalidRequest, UnsupportedCapability
from jupyter_superfluid.generation import wire
from jupyter_superfluid.lmsp.problems import UnsupportedExtension, UnsupportedVersion
from jupyter_superfluid.validation import parse

VERSION = "1.0"
EXTENSION = "superfluid"  # the name of this service's own request extension
SUPPORTED_VERSIONS = (VERSION,)


class _Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")


# -- input items: generation.wire's models, narrowed to what LMSP 1.0 takes -------------
# Subclasses, so that the validated items go to the chat path (messages_from_items)
# as they are; the names are wire's, the shapes section 6.1's.


class TextPart(wire.TextPart):
    """A text content part (``output_text`` when an assistant turn is sent back)."""

    type: Literal["input_text", "output_text"]


class ReservedPart(wire.Wire):
    """Image, audio and file content: reserved for a later LMSP version."""

    type: Literal["input_image", "input_audio", "input_file"]


Part = Annotated[TextPart | ReservedPart, Field(discriminator="type")]


class MessageItem(wire.MessageItem):
    """A message input item; ``id`` and other output fields are accepted back."""

    role: Literal["system", "user", "assistant"]
    # A list of parts, never a string; reserved parts are refused by parse_request.
    content: Annotated[list[Part], Field(max_length=wire.MAX_PARTS)]  # type: ignore[assignment]


class FunctionCallItem(wire.FunctionCallItem):
    """A ``function_call`` item, as the service returned it."""

    # The length first, so that a long name is told so; then wire's pattern.
    name: str = Field(min_length=1, max_length=128, pattern=wire.NAME)


class FunctionCallOutputItem(wire.FunctionCallOutputItem):
    """The client's result of a function call: a string (6.5)."""

    output: str


class SummaryPart(wire.TextPart):
    """A ``summary_text`` part of a reasoning item."""

    type: Literal["summary_text"]


class ReasoningItem(wire.ReasoningItem):
    """A ``reasoning`` item, as the service returned it."""

    summary: Annotated[list[SummaryPart], Field(max_length=wire.MAX_PARTS)]  # type: ignore[assignment]


InputItem = Annotated[
    Annotated[MessageItem, Tag("message")]
    | Annotated[FunctionCallItem, Tag("function_call")]
    | Annotated[FunctionCallOutputItem, Tag("function_call_output")]
    | Annotated[ReasoningItem, Tag("reasoning")],
    Discriminator(wire._item_tag),  # wire's: its name is in pydantic's messages
]


class LmspFunctionTool(wire.FunctionTool):
    """A function tool the client executes (section 6.5); its name has no ``:``."""

    name: str = Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.-]+$")


class LmspToolChoice(wire.FunctionChoice):
    """``{"type": "function", "name": ...}``: wire's named choice, without a namespace."""

    model_config = ConfigDict(strict=True, extra="forbid")
    namespace: None = None


class LmspJsonSchema(wire.Wire):
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


class LmspCreateRequest(wire.Wire):
    """``POST /lmsp/v1/responses`` (and the body of ``POST /lmsp/v1/tasks``)."""

    model: str = Field(min_length=1)
    input: Annotated[list[InputItem], Field(min_length=1, max_length=wire.MAX_ITEMS)]
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
    """The validated input items as the JSON the store keeps."""
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

"""What a chat template's syntax is: plain dataclasses, derived from renders or hand-written.

A tool call is written as a *layout*: literal text and holes (the function's name, the
call's id, its index, its arguments). Arguments are either one JSON object or a run of
tagged arguments, each itself a layout of literal text, the key and the value.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Literal


class Hole(Enum):
    """A variable part of a layout."""

    NAME = "name"  # the function's (qualified) name
    ID = "id"  # the call's id
    INDEX = "index"  # the call's position, counted by the template
    ARGS = "args"  # the arguments
    KEY = "key"  # one argument's name
    VALUE = "value"  # one argument's value


Layout = tuple["str | Hole", ...]

# How a tagged argument's value is written. Strings as they are and: anything else as
# JSON ("raw": GLM, DSML); containers as JSON, other values as Jinja's ``string`` filter
# writes them, ``True`` ("text": Qwen3-Coder); everything through ``string`` ("pystr":
# Seed-OSS). Or Python literals with quoted strings ("python": LFM2), or Gemma 4's own
# notation ("gemma": <|"|>-quoted strings, bare keys).
ValueNotation = Literal["raw", "text", "pystr", "python", "gemma"]
JsonType = Literal["string", "number", "boolean", "null", "array", "object"]


@dataclass(frozen=True)
class TaggedArguments:
    """Arguments as a run of tagged pieces: ``open piece (sep piece)* close``, or ``empty``."""

    layouts: tuple[tuple[JsonType, Layout], ...]  # a piece for a value of each type
    notation: ValueNotation = "raw"
    sep: str = ""
    open: str = ""
    close: str = ""
    empty: str = ""  # what a call without arguments has instead
    sort_keys: bool = False  # the template writes keys sorted (Gemma 4)

    def layout(self, kind: JsonType) -> Layout:
        """The piece layout for a value of ``kind`` (the string one when none differs)."""
        for name, layout in self.layouts:
            if name == kind:
                return layout
        return self.layouts[0][1]


@dataclass(frozen=True)
class JsonArguments:
    """Arguments as one JSON object (``as_string``: a JSON string holding it), spaced as
    HF's ``tojson`` writes it, or with ``indent`` and every line after the first led by
    ``margin`` (``tojson(indent=4) | indent(8)``)."""

    as_string: bool = False
    indent: int | None = None
    margin: str = ""


Arguments = TaggedArguments | JsonArguments


@dataclass(frozen=True)
class JsonCall:
    """A call that is one JSON object, for reading it whatever its key order and spacing."""

    name: tuple[str, ...]  # the key path of the name; () when the name is the only key
    arguments: tuple[str, ...]
    id: tuple[str, ...] | None = None
    arguments_as_string: bool = False


@dataclass(frozen=True)
class CallSyntax:
    """How a turn writes its calls: ``section_open call (sep call)* section_close``."""

    call: Layout
    arguments: Arguments
    section_open: str = ""
    section_close: str = ""
    sep: str = ""
    parallel: bool = True  # the template renders more than one call per turn
    index_base: int = 0  # the first call's INDEX
    json_call: JsonCall | None = None
    id_pattern: str = r"[A-Za-z0-9_\-.:]{1,64}"  # what an ID hole reads


@dataclass(frozen=True)
class ReasoningSyntax:
    """Reasoning between two markers (``open`` may be left to the generation prompt)."""

    open: str
    close: str
    gap: str = ""  # what the template writes between the closing marker and the answer


@dataclass(frozen=True)
class TemplateSyntax:
    """Everything the output parser and the call grammar need to know of a template."""

    family: str  # "derived", a hand-written family's name, or "generic"
    calls: CallSyntax | None = None
    reasoning: ReasoningSyntax | None = None
    ends: tuple[str, ...] = ()  # markers that end the assistant's turn
    layout_markers: tuple[str, ...] = ()  # markers the template puts around message text
    content_lead: str = ""  # text a turn writes after the generation prompt, before its text
    describes_tools: bool = False  # the template lists the tools to the model itself
    renders_calls: bool = False  # the template renders an assistant's calls (else as text)
    renders_results: bool = False  # the template renders tool results
    result_shape: str = ""  # how tool results come back, for people (the docs' template table)
    notes: tuple[str, ...] = field(default_factory=tuple)  # why, where something was not derived

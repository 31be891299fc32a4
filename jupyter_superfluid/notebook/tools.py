"""Python functions as Responses function tools: schema from signature and docstring, calls.

The parameters' JSON schema comes from a pydantic model built from the signature, so
every type pydantic knows works (``int``, ``float``, ``str``, ``bool``, ``list[...]``,
``dict[...]``, ``Optional``, ``Literal``, enums, pydantic models), and the model's
arguments are validated and converted (an enum member, a model instance) before the
call. The docstring's first line describes the tool; ``Args:`` (Google style) and
``:param x:`` (Sphinx style) lines describe the parameters.
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

_ARGS_HEADER = re.compile(r"^\s*(Args|Arguments|Parameters)\s*:\s*$")
_GOOGLE_ARG = re.compile(r"^\s*\*{0,2}(\w+)\s*(\([^)]*\))?\s*:\s*(.*)$")
_SPHINX_ARG = re.compile(r"^\s*:param\s+(?:[^:]*\s)?(\w+)\s*:\s*(.*)$")
_SECTION = re.compile(r"^\s*[A-Z][A-Za-z ]*:\s*$")


@dataclass
class Tool:
    """One callable exposed to the model."""

    name: str
    fn: Callable[..., Any]
    spec: dict[str, Any]  # the Responses function tool
    model: Any  # the pydantic model that validates the arguments


def function_tool(fn: Callable[..., Any], name: str | None = None) -> Tool:
    """Describe ``fn`` as a Responses function tool."""
    from pydantic import ConfigDict, Field, create_model

    sig = inspect.signature(fn)
    hints = _hints(fn)
    fields: dict[str, Any] = {}
    for index, param in enumerate(sig.parameters.values()):
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue  # *args/**kwargs have no names a model could fill
        annotation = hints.get(param.name, Any)
        default = ... if param.default is param.empty else param.default
        # Aliased so that parameter names like `json` or `model_id` cannot clash with
        # BaseModel's own attributes.
        fields[f"p{index}"] = (annotation, Field(default, alias=param.name))
    tool_name = str(name or getattr(fn, "__name__", "tool"))
    config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)
    model = create_model(  # type: ignore[call-overload]
        f"{tool_name}_arguments", __config__=config, **fields
    )
    summary, params_doc = parse_docstring(inspect.getdoc(fn) or "")
    spec: dict[str, Any] = {
        "type": "function",
        "name": tool_name,
        "parameters": _parameters(model.model_json_schema(), params_doc),
    }
    if summary:
        spec["description"] = summary
    return Tool(tool_name, fn, spec, model)


def _hints(fn: Callable[..., Any]) -> dict[str, Any]:
    """Resolved type hints (string annotations included), or none if they do not resolve."""
    import typing

    try:
        return typing.get_type_hints(fn, include_extras=True)
    except Exception:  # a forward reference to something the namespace lacks
        return {}


def _parameters(schema: dict[str, Any], docs: dict[str, str]) -> dict[str, Any]:
    """Pydantic's schema, trimmed of titles, with the docstring's parameter descriptions."""
    schema = _strip_titles(schema)
    for name, prop in schema.get("properties", {}).items():
        if name in docs and "description" not in prop:
            prop["description"] = docs[name]
    schema.setdefault("properties", {})
    schema["additionalProperties"] = False
    return schema


def _strip_titles(node: Any) -> Any:
    """Drop pydantic's generated ``title`` keys (noise in a prompt), keep everything else."""
    if isinstance(node, dict):
        return {
            k: (_strip_titles(v) if k != "properties" else _strip_props(v))
            for k, v in node.items()
            if k != "title" or not isinstance(v, str)
        }
    if isinstance(node, list):
        return [_strip_titles(v) for v in node]
    return node


def _strip_props(props: dict[str, Any]) -> dict[str, Any]:
    """Property names may be ``title``; only their schemas lose titles."""
    return {name: _strip_titles(schema) for name, schema in props.items()}


def parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """The first line, and parameter descriptions from ``Args:`` or ``:param x:`` lines."""
    lines = doc.strip().splitlines()
    summary = lines[0].strip() if lines and not _SPHINX_ARG.match(lines[0]) else ""
    params: dict[str, str] = {}
    in_args = False
    last: str | None = None
    for line in lines[1 if summary else 0 :]:
        sphinx = _SPHINX_ARG.match(line)
        if sphinx:
            last = sphinx.group(1)
            params[last] = sphinx.group(2).strip()
            continue
        if _ARGS_HEADER.match(line):
            in_args, last = True, None
            continue
        if in_args and _SECTION.match(line):
            in_args, last = False, None  # Returns:, Raises: … end the Args section
            continue
        google = _GOOGLE_ARG.match(line) if in_args else None
        if google:
            last = google.group(1)
            params[last] = google.group(3).strip()
        elif last and line.strip() and line[:1].isspace():
            params[last] = f"{params[last]} {line.strip()}".strip()  # continuation line
        elif not line.strip():
            last = None
    return summary, params


def call_tool(tool: Tool, arguments: str) -> str:
    """Run the tool on the model's JSON arguments; its result (or the error) as text."""
    from pydantic import ValidationError

    try:
        parsed = tool.model.model_validate_json(arguments or "{}")
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}" for e in exc.errors()
        )
        return f"invalid arguments for {tool.name}: {problems}"
    fields = type(parsed).model_fields
    kwargs = {info.alias or name: getattr(parsed, name) for name, info in fields.items()}
    try:
        result = _invoke(tool.fn, kwargs)
    except Exception as exc:
        # The model sees what went wrong and may try again or explain.
        return f"{type(exc).__name__}: {exc}"
    return tool_output(result)


def _invoke(fn: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    """Call with positional-only parameters passed by position."""
    sig = inspect.signature(fn)
    positional = [
        kwargs.pop(p.name) for p in sig.parameters.values() if p.kind is p.POSITIONAL_ONLY
    ]
    return fn(*positional, **kwargs)


def tool_output(result: Any) -> str:
    """A tool result as the string a ``function_call_output`` carries."""
    if isinstance(result, str):
        return result
    dump = getattr(result, "model_dump_json", None)
    if callable(dump):
        return str(dump())
    try:
        return json.dumps(result, default=_jsonable)
    except (TypeError, ValueError):
        return repr(result)


def _jsonable(value: Any) -> Any:
    """Enums, models, dataclasses, dates… as JSON values; anything else as its str()."""
    from pydantic_core import PydanticSerializationError, to_jsonable_python

    try:
        return to_jsonable_python(value)
    except PydanticSerializationError:
        return str(value)

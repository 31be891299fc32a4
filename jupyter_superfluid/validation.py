"""Validation at the edge, shared by every protocol: JSON bodies, typed models, JSON schemas.

``json_document`` parses a request body with limits (nesting depth; NaN,
Infinity and lone surrogates refused). ``parse`` validates a value as a
pydantic model and turns the first error into an ``InvalidRequest`` (400)
naming the exact field in the protocol's path notation (``input[2].content[0].text``).
``check_schema`` refuses a JSON schema that is not one (the meta-schema) or that
would make grammar generation unbounded (huge repetition counts, deep nesting,
huge enums), naming the field that carried it.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from jupyter_superfluid.errors import InvalidRequest

M = TypeVar("M", bound=BaseModel)

MAX_DEPTH = 64  # nesting of a request body
MAX_SCHEMA_DEPTH = 32  # nesting of a JSON schema (objects and arrays) that becomes a grammar
# Grammar repetitions: llama.cpp's converter nests one optional group per allowed
# repetition up to a maximum (its parser recurses through them: 20000 crash it) and
# writes a minimum out as a count (cheap, but a billion is not).
MAX_REPEAT = {"maxLength": 1000, "maxItems": 1000, "maxProperties": 1000}
MAX_REPEAT |= {"minLength": 10000, "minItems": 10000, "minProperties": 10000}
MAX_ENUM = 1024
MAX_SCHEMA_BYTES = 64 * 1024
_TAG_ERRORS = ("union_tag_invalid", "union_tag_not_found")
_PATTERN_REPEAT = re.compile(r"\{(\d+)(,(\d*))?\}")


def json_document(raw: bytes) -> Any:
    """The JSON value of a request body, or a 400 naming what is wrong."""
    try:
        value = json.loads(raw or b"", parse_constant=_no_constant)
    except RecursionError as err:
        raise InvalidRequest(f"the request body nests deeper than {MAX_DEPTH} levels") from err
    except (ValueError, UnicodeDecodeError) as err:
        raise InvalidRequest(f"the request body is not valid JSON: {err}") from err
    check_document(value)
    return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def check_document(value: Any) -> None:
    """400 for nesting past ``MAX_DEPTH`` or text with lone surrogates (named by path)."""
    stack: list[tuple[Any, str, int]] = [(value, "", 0)]
    while stack:
        node, path, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise InvalidRequest(
                f"{path or 'body'}: the request body nests deeper than {MAX_DEPTH} levels",
                param=path or None,
            )
        if isinstance(node, str):
            _check_text(node, path)
        elif isinstance(node, dict):
            for key, child in node.items():
                _check_text(key, path)
                stack.append((child, f"{path}.{key}" if path else key, depth + 1))
        elif isinstance(node, list):
            stack.extend((child, f"{path}[{i}]", depth + 1) for i, child in enumerate(node))


def _check_text(text: str, path: str) -> None:
    if text.isascii():
        return
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        raise InvalidRequest(
            f"{path or 'body'}: the text holds a lone surrogate (\\u{ord(text[err.start]):04x})",
            param=path or None,
        ) from err


def parse(cls: type[M], body: Any, prefix: str = "") -> M:
    """Validate ``body`` as ``cls``, or raise a 400 naming the field at fault."""
    try:
        return cls.model_validate(body)
    except ValidationError as err:
        raise invalid(err, body, prefix) from err


def invalid(err: ValidationError, body: Any, prefix: str = "") -> InvalidRequest:
    """The 400 of a validation error: its deepest error, named by its path in ``body``."""
    best: tuple[int, str, str] | None = None
    for e in err.errors(include_url=False):
        path, depth, node = _walk(body, e["loc"])
        if e["type"] in _TAG_ERRORS and isinstance(node, Mapping):
            path += ".type" if path else "type"
            depth += 1
        if best is None or depth > best[0]:
            best = (depth, path, e["msg"])
    assert best is not None
    param = join_path(prefix, best[1])
    return InvalidRequest(f"{param or 'body'}: {best[2]}", param=param or None)


def _walk(body: Any, loc: tuple[Any, ...]) -> tuple[str, int, Any]:
    """The path of ``loc`` in ``body`` (skipping the union members pydantic names in it),
    its depth, and the value there."""
    path, depth, node = "", 0, body
    for n, part in enumerate(loc):
        if isinstance(part, int) and isinstance(node, list) and 0 <= part < len(node):
            path += f"[{part}]"
            node = node[part]
        elif isinstance(part, str) and isinstance(node, Mapping) and part in node:
            path += f".{part}" if path else part
            node = node[part]
        elif n == len(loc) - 1 and isinstance(node, Mapping) and str(part).isidentifier():
            path += f".{part}" if path else str(part)  # a missing field
            node = None
        else:
            continue  # a union member's name or tag: not in the document
        depth += 1
    return path, depth, node


def join_path(prefix: str, path: str) -> str:
    """``input[0]`` + ``content`` → ``input[0].content`` (either may be empty)."""
    if not prefix or not path:
        return prefix or path
    return prefix + path if path.startswith("[") else f"{prefix}.{path}"


def check_schema(schema: Any, param: str) -> None:
    """400 naming ``param`` unless ``schema`` is a JSON schema a grammar can be made of."""
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    if not isinstance(schema, dict):
        raise InvalidRequest(f"{param} must be a JSON schema object", param=param)
    if len(json.dumps(schema)) > MAX_SCHEMA_BYTES:
        raise InvalidRequest(f"{param}: the schema exceeds {MAX_SCHEMA_BYTES} bytes", param=param)
    _check_bounds(schema, param)
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as err:
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err.path)
        raise InvalidRequest(
            f"{param}{where}: not a valid JSON schema: {err.message}", param=param
        ) from err
    except RecursionError as err:
        raise InvalidRequest(f"{param}: the schema nests too deeply", param=param) from err


def _check_bounds(schema: Any, param: str) -> None:
    """Refuse what would make the grammar compiler's work unbounded."""
    stack: list[tuple[Any, int]] = [(schema, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_SCHEMA_DEPTH:
            raise InvalidRequest(
                f"{param}: the schema nests deeper than {MAX_SCHEMA_DEPTH} levels", param=param
            )
        if isinstance(node, dict):
            for key, most in MAX_REPEAT.items():
                value = node.get(key)
                if isinstance(value, bool) or not isinstance(value, int | float):
                    continue
                if not math.isfinite(value) or value > most:
                    raise InvalidRequest(
                        f"{param}: {key} {value} exceeds {most}, the most a grammar can enforce",
                        param=param,
                    )
            _check_pattern(node.get("pattern"), param)
            enum = node.get("enum")
            if isinstance(enum, list) and not enum:
                raise InvalidRequest(f"{param}: an empty enum matches no value", param=param)
            if isinstance(enum, list) and len(enum) > MAX_ENUM:
                raise InvalidRequest(
                    f"{param}: an enum of {len(enum)} values exceeds {MAX_ENUM}", param=param
                )
            stack.extend((child, depth + 1) for child in node.values())
        elif isinstance(node, list):
            stack.extend((child, depth + 1) for child in node)


def _check_pattern(pattern: Any, param: str) -> None:
    """A ``pattern``'s ``{m,n}`` counts have the bounds of ``minLength``/``maxLength``."""
    if not isinstance(pattern, str):
        return
    for match in _PATTERN_REPEAT.finditer(pattern):
        low, comma, high = match.group(1), match.group(2), match.group(3)
        top = int(high) if high else (None if comma else int(low))
        if int(low) > MAX_REPEAT["minLength"] or (top or 0) > MAX_REPEAT["maxLength"]:
            raise InvalidRequest(
                f"{param}: the pattern repetition {match.group(0)} exceeds what a grammar "
                "can enforce",
                param=param,
            )

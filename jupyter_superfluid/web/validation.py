"""Request validation with pydantic, shared by every protocol.

A validation error becomes an ``InvalidRequest`` (400) naming the first field
at fault in the protocol's own path notation (``input[0].content``).
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from ..errors import InvalidRequest

M = TypeVar("M", bound=BaseModel)


def parse(cls: type[M], body: Any, prefix: str = "") -> M:
    """Validate ``body`` as ``cls``, or raise a 400 naming the first bad field."""
    try:
        return cls.model_validate(body)
    except ValidationError as err:
        first = err.errors()[0]
        param = join_path(prefix, field_path(first["loc"]))
        raise InvalidRequest(f"{param or 'body'}: {first['msg']}", param=param or None) from err


def join_path(prefix: str, path: str) -> str:
    """``input[0]`` + ``content`` → ``input[0].content`` (either may be empty)."""
    if not prefix or not path:
        return prefix or path
    return prefix + path if path.startswith("[") else f"{prefix}.{path}"


def field_path(loc: tuple[Any, ...]) -> str:
    """``("messages", 0, "content")`` → ``messages[0].content``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif not _is_union_tag(part):
            out += f".{part}" if out else str(part)
    return out


def _is_union_tag(part: str) -> bool:
    # pydantic inserts union member names ("str", "list[...]") into locations.
    return part in ("str", "int", "float", "bool") or "[" in part or part.endswith("]")

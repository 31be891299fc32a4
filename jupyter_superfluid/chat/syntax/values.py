"""How tagged arguments' values are written, and read back: the value notations.

Strings are written as they are, and other values: ``raw`` as JSON (``tojson``: GLM,
MiniMax, DeepSeek's DSML); ``text`` containers as JSON and scalars as Jinja's ``string``
filter writes them (``True``, ``None``: Qwen3-Coder); ``pystr`` everything through
``string`` (``{'a': 1}``: Seed-OSS). ``python`` writes Python-style literals with quoted
strings (``'Paris'``: LFM2); ``gemma`` Gemma 4's notation (strings between ``<|"|>``,
objects with bare keys). Reading an unquoted value back needs the JSON type it was
meant to have: a string schema keeps the text, anything else is parsed when it parses.
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

from jupyter_superfluid.chat.syntax.model import JsonType, ValueNotation

GEMMA_QUOTE = '<|"|>'


def json_type(value: Any) -> JsonType:
    """The JSON type name of a Python value."""
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if value is None:
        return "null"
    if isinstance(value, dict):
        return "object"
    return "array"


def _tojson(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _python(value: Any) -> str:
    if isinstance(value, str):
        return f"'{value}'"
    if isinstance(value, dict):
        return _tojson(value)  # LFM2's template writes mappings with tojson
    return str(value)


def _gemma(value: Any) -> str:
    """Gemma 4's notation as its template writes tool calls (keys bare and sorted)."""
    if isinstance(value, str):
        return f"{GEMMA_QUOTE}{value}{GEMMA_QUOTE}"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "{" + ",".join(f"{key}:{_gemma(value[key])}" for key in sorted(value)) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_gemma(v) for v in value) + "]"
    return str(value)


QUOTED: frozenset[ValueNotation] = frozenset({"python", "gemma"})  # strings are delimited


def encode(value: Any, notation: ValueNotation) -> str:
    """One argument value as the template writes it."""
    if notation == "python":
        return _python(value)
    if notation == "gemma":
        return _gemma(value)
    if isinstance(value, str):
        return value
    if notation == "pystr" or (notation == "text" and not isinstance(value, (dict, list))):
        return str(value)
    return _tojson(value)


def decode_text(text: str, kind: str | None) -> Any:
    """An unquoted value read back: text for a string schema, else JSON or a Python
    literal (``True``, ``{'a': 1}``) if it parses as one."""
    if kind == "string":
        return text
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    try:
        return ast.literal_eval(text.strip())
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return text


def read(text: str, pos: int, notation: ValueNotation) -> tuple[Any, int] | None:
    """Read one python- or gemma-notation value at ``pos``: (value, end) or None."""
    if notation == "gemma":
        return _read_gemma(text, pos)
    return _read_python(text, pos)


_PY_TOKEN = re.compile(
    r"'[^']*'|\"(?:[^\"\\]|\\.)*\"|-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|True|False|None"
)


def _read_python(text: str, pos: int) -> tuple[Any, int] | None:
    if text.startswith(("{", "["), pos):
        try:
            value, end = json.JSONDecoder().raw_decode(text, pos)
            return value, end
        except json.JSONDecodeError:
            return _read_python_literal(text, pos)
    match = _PY_TOKEN.match(text, pos)
    if match is None:
        return None
    token = match.group(0)
    if token.startswith("'"):
        return token[1:-1], match.end()
    return ast.literal_eval(token), match.end()


def _read_python_literal(text: str, pos: int) -> tuple[Any, int] | None:
    """A bracketed Python literal (``['a', 'b']``) read by balancing brackets."""
    depth, at, quote = 0, pos, ""
    while at < len(text):
        char = text[at]
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char in "[{(":
            depth += 1
        elif char in "]})":
            depth -= 1
            if depth == 0:
                try:
                    return ast.literal_eval(text[pos : at + 1]), at + 1
                except (ValueError, SyntaxError):
                    return None
        at += 1
    return None


_GEMMA_SCALAR = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|true|false|null|None")


def _read_gemma(text: str, pos: int) -> tuple[Any, int] | None:
    if text.startswith(GEMMA_QUOTE, pos):
        end = text.find(GEMMA_QUOTE, pos + len(GEMMA_QUOTE))
        return (text[pos + len(GEMMA_QUOTE) : end], end + len(GEMMA_QUOTE)) if end >= 0 else None
    if text.startswith("{", pos):
        return _read_gemma_object(text, pos + 1)
    if text.startswith("[", pos):
        return _read_gemma_array(text, pos + 1)
    match = _GEMMA_SCALAR.match(text, pos)
    if match is None:
        return None
    token = match.group(0)
    scalars: dict[str, Any] = {"true": True, "false": False, "null": None, "None": None}
    return (scalars[token] if token in scalars else json.loads(token)), match.end()


def _read_gemma_object(text: str, pos: int) -> tuple[Any, int] | None:
    out: dict[str, Any] = {}
    while pos < len(text) and text[pos] != "}":
        key = read_gemma_key(text, pos)
        if key is None or not text.startswith(":", key[1]):
            return None
        item = _read_gemma(text, key[1] + 1)
        if item is None:
            return None
        out[key[0]], pos = item
        if text.startswith(",", pos):
            pos += 1
    return (out, pos + 1) if pos < len(text) else None


def read_gemma_key(text: str, pos: int) -> tuple[str, int] | None:
    """A key of a Gemma 4 object, quoted or bare: (key, end) or None."""
    if text.startswith(GEMMA_QUOTE, pos):
        end = text.find(GEMMA_QUOTE, pos + len(GEMMA_QUOTE))
        return (text[pos + len(GEMMA_QUOTE) : end], end + len(GEMMA_QUOTE)) if end >= 0 else None
    match = re.compile(r"[^:{}\[\],<\s]+").match(text, pos)
    return (match.group(0), match.end()) if match else None


def _read_gemma_array(text: str, pos: int) -> tuple[Any, int] | None:
    out: list[Any] = []
    while pos < len(text) and text[pos] != "]":
        item = _read_gemma(text, pos)
        if item is None:
            return None
        value, pos = item
        out.append(value)
        if text.startswith(",", pos):
            pos += 1
    return (out, pos + 1) if pos < len(text) else None

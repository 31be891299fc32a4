"""The sandboxed Jinja environment chat templates render in.

Hugging Face's ``apply_chat_template`` renders in an ``ImmutableSandboxedEnvironment``
with ``trim_blocks``/``lstrip_blocks``, ``loopcontrols``, the ``{% generation %}`` block,
an HTML-free ``tojson``, ``raise_exception`` and ``strftime_now``. Real templates also
lean on what llama.cpp's own Jinja engine accepts, and this environment accepts it too,
still sandboxed: ``list.append``/``list.pop`` on lists the template built (Kimi K2),
attribute access on undefined values yielding undefined, and ``None``/undefined joined
to a string by ``+`` reading as the empty string.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

# The list methods llama.cpp's engine provides (value.cpp); every other mutation of a
# list, dict or set stays refused by the sandbox.
_LIST_METHODS = frozenset({"append", "pop"})


class TemplateRefusal(ValueError):
    """The template raised while rendering: its own message (``raise_exception``) or error."""


class _GenerationBlock(jinja2.ext.Extension):
    """Accept HF's ``{% generation %}...{% endgeneration %}`` and render its body as is."""

    tags = {"generation"}

    def parse(self, parser: Any) -> Any:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.Scope(body, lineno=lineno)


def _raise_exception(message: str) -> None:
    raise jinja2.exceptions.TemplateError(message)


def _plain(value: Any) -> Any:
    """A JSON-serialisable copy: generators and tuples as lists, undefined as null."""
    if isinstance(value, jinja2.Undefined):
        return None
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, Iterable):
        return [_plain(v) for v in value]
    return value


def _tojson(
    value: Any,
    ensure_ascii: bool = False,
    indent: int | None = None,
    separators: tuple[str, str] | None = None,
    sort_keys: bool = False,
) -> str:
    # Jinja's own tojson escapes HTML and sorts keys; HF's does neither, and templates
    # (and the models trained on them) expect HF's output.
    return json.dumps(
        _plain(value),
        ensure_ascii=ensure_ascii,
        indent=indent,
        separators=separators,
        sort_keys=sort_keys,
    )


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


def _is_blank(value: Any) -> bool:
    return value is None or isinstance(value, jinja2.Undefined)


class TemplateEnvironment(ImmutableSandboxedEnvironment):
    """HF's chat-template sandbox plus the leniencies of llama.cpp's Jinja engine."""

    intercepted_binops = frozenset({"+"})

    def __init__(self) -> None:
        super().__init__(
            trim_blocks=True,
            lstrip_blocks=True,
            extensions=[_GenerationBlock, jinja2.ext.loopcontrols],
            undefined=jinja2.ChainableUndefined,
        )
        self.filters["tojson"] = _tojson
        self.globals["raise_exception"] = _raise_exception
        self.globals["strftime_now"] = _strftime_now

    def is_safe_attribute(self, obj: Any, attr: str, value: Any) -> bool:
        """Refuse what HF's sandbox refuses, except ``append``/``pop`` on a list."""
        if isinstance(obj, list) and attr in _LIST_METHODS:
            return True
        return super().is_safe_attribute(obj, attr, value)

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        """``+``: a string joined to None or undefined reads it as "" (as llama.cpp does)."""
        if operator == "+":
            if isinstance(left, str) and _is_blank(right):
                return left
            if isinstance(right, str) and _is_blank(left):
                return right
        return super().call_binop(context, operator, left, right)


def compile_template(source: str) -> jinja2.Template:
    """A chat template compiled in the sandbox (raises TemplateRefusal if it does not parse)."""
    try:
        return TemplateEnvironment().from_string(source)
    except jinja2.TemplateSyntaxError as err:
        raise TemplateRefusal(f"the chat template does not parse: {err}") from err

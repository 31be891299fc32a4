"""The special tokens a template uses, for building a tiny model that tokenizes like the
real one (its markers single control tokens, its turn ends the end-of-generation tokens).

The markers are read from what the template renders (probe conversations with and
without tools and thinking) and from its source's literals of special-token shape, so
markers a template assembles (``'<|' + role + '|>'``) are found as well as ones it only
writes in some branch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from jupyter_superfluid.chat import probes
from jupyter_superfluid.chat.environment import TemplateRefusal
from jupyter_superfluid.chat.syntax import markers
from jupyter_superfluid.chat.types import ChatMessage

_SENTINELS = re.compile(r"sf[a-z]+|superfluid|probe", re.IGNORECASE)
_LITERAL = re.compile(r"'((?:[^'\\]|\\.)*)'|\"((?:[^\"\\]|\\.)*)\"")


@dataclass(frozen=True)
class TemplateTokens:
    """A template's markers, and those among them that end the assistant's turn."""

    special: tuple[str, ...]
    eos: str
    eog: tuple[str, ...]


def template_tokens(codec: Any) -> TemplateTokens:
    """The special tokens of ``codec``'s template (a ``ChatCodec``)."""
    rendered = markers.special_tokens(_renders(codec))
    literals = [m.group(1) or m.group(2) or "" for m in _LITERAL.finditer(codec.template_source)]
    written = [m.group(0) for text in literals for m in markers.SPECIAL_SHAPE.finditer(text)]
    syntax = codec.syntax
    own = (syntax.reasoning.open, syntax.reasoning.close) if syntax and syntax.reasoning else ()
    found = dict.fromkeys((*rendered, *written, *(m for m in own if markers.is_marker(m))))
    special = tuple(m for m in found if not _SENTINELS.search(m))
    ends = tuple(e for e in (codec.syntax.ends if codec.syntax else ()) if e)
    eos = ends[0] if ends else ""
    return TemplateTokens(special=special, eos=eos, eog=ends[1:3])


def _renders(codec: Any) -> list[str]:
    out = []
    kwargs: list[dict[str, Any]] = [{}]
    if codec.thinking_switch:
        kwargs += [{codec.thinking_switch: True}, {codec.thinking_switch: False}]
    user = (ChatMessage("user", "Hi"),)
    for kw in kwargs:
        for tools in ((), probes.PROBE_TOOLS):
            for messages in (user, *probes.PROBE_CONVERSATIONS):
                try:
                    out.append(codec.render(messages, tools=tools, template_kwargs=kw))
                except TemplateRefusal:
                    continue
    return out

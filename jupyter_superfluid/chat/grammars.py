"""GBNF grammars that force a model's output: JSON by schema, any JSON object, one tool call.

JSON schemas are converted by llama-cpp-python's own ``SchemaConverter`` (the port of
llama.cpp's ``json_schema_to_grammar.py``), so the grammars match what llama.cpp expects.
Every builder can prefix a bounded reasoning section for prompts that open ``<think>``:
the model may think briefly, must close ``</think>``, and the result still parses with
the Hermes output parser. Every grammar's start rule is ``root``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from jupyter_superfluid.chat.types import ToolSpec

DEFAULT_REASONING_CHARS = 256

# llama-cpp-python's converter lets raw control characters into strings (its `char` is
# [^"\\]); JSON forbids them, and json.loads would reject what the model was forced to
# write, so strings use the stricter character class of llama.cpp's own json.gbnf.
_STRICT_CHAR = (
    r'[^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | '
    r'"u" [0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F])'
)
_ANY_OBJECT: dict[str, Any] = {"type": "object"}


def gbnf_literal(text: str) -> str:
    """A GBNF string literal matching ``text`` exactly."""
    escaped = (
        text.replace("\\", "\\\\")
        .replace('"', '\\"')
        .replace("\n", "\\n")
        .replace("\r", "\\r")
        .replace("\t", "\\t")
    )
    return f'"{escaped}"'


class _Rules:
    """Rules from JSON schemas (through llama-cpp-python's converter) plus our own."""

    def __init__(self) -> None:
        # Imported lazily: loading llama_cpp loads the native library, which the rest of
        # the chat layer never needs.
        from llama_cpp.llama_grammar import SchemaConverter

        self._converter = SchemaConverter(
            prop_order={}, allow_fetch=False, dotall=False, raw_pattern=False
        )
        self._extra: dict[str, str] = {}

    def schema(self, schema: Mapping[str, Any], name: str) -> str:
        """Add rules for a JSON schema; return the rule name that matches it."""
        try:
            resolved = self._converter.resolve_refs(json.loads(json.dumps(schema)), name)
            return str(self._converter.visit(resolved, name))
        except (AssertionError, KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"unsupported JSON schema: {exc}") from exc

    def add(self, name: str, rule: str) -> str:
        """Add a rule of our own; return its name."""
        self._extra[name] = rule
        return name

    def grammar(self, root: str) -> str:
        """The whole grammar text with ``root ::= <root>``."""
        # The converter keeps its rules in a private dict; it has no public way to
        # replace a built-in rule, and `char` must be the strict one (see _STRICT_CHAR).
        rules: dict[str, str] = dict(self._converter._rules)
        if "char" in rules:
            rules["char"] = _STRICT_CHAR
        rules.update(self._extra)
        rules["root"] = root
        return "\n".join(f"{name} ::= {rule}" for name, rule in sorted(rules.items())) + "\n"


def _reasoning_prefix(rules: _Rules, reasoning: bool, chars: int) -> str:
    """The rule sequence to put before the forced output ("" without reasoning)."""
    if not reasoning:
        return ""
    # No "<" in the reasoning, so it cannot open or fake a tag; bounded so a forced
    # model reaches the answer.
    rules.add("reasoning-text", f"[^<]{{0,{chars}}}")
    rules.add("reasoning", 'reasoning-text "</think>\\n\\n"')
    return "reasoning "


def json_schema_grammar(
    schema: Mapping[str, Any],
    *,
    reasoning: bool = False,
    reasoning_chars: int = DEFAULT_REASONING_CHARS,
) -> str:
    """A grammar for one JSON value matching ``schema`` (optionally after brief reasoning)."""
    rules = _Rules()
    prefix = _reasoning_prefix(rules, reasoning, reasoning_chars)
    value = rules.schema(schema, "json")
    return rules.grammar(prefix + value)


def json_object_grammar(
    *, reasoning: bool = False, reasoning_chars: int = DEFAULT_REASONING_CHARS
) -> str:
    """A grammar for any one JSON object (optionally after brief reasoning)."""
    return json_schema_grammar(_ANY_OBJECT, reasoning=reasoning, reasoning_chars=reasoning_chars)


def tool_call_grammar(
    tools: Sequence[ToolSpec],
    *,
    only: str | None = None,
    reasoning: bool = False,
    reasoning_chars: int = DEFAULT_REASONING_CHARS,
) -> str:
    """A grammar for exactly one Hermes ``<tool_call>`` to one of ``tools`` (or ``only``)."""
    chosen = [t for t in tools if only is None or t.qualified_name == only]
    if not chosen:
        raise ValueError(f"no tool named {only!r}" if only else "no tools to call")
    rules = _Rules()
    prefix = _reasoning_prefix(rules, reasoning, reasoning_chars)
    alternatives = []
    for i, tool in enumerate(chosen):
        args = rules.schema(tool.parameters or _ANY_OBJECT, f"call{i}-args")
        # The layout the Qwen3/Hermes templates show the model and render past calls in.
        head = gbnf_literal(
            f'{{"name": {json.dumps(tool.qualified_name, ensure_ascii=False)}, "arguments": '
        )
        alternatives.append(rules.add(f"call{i}", f'{head} {args} "}}"'))
    body = rules.add("call", " | ".join(alternatives))
    open_tag, close_tag = gbnf_literal("<tool_call>\n"), gbnf_literal("\n</tool_call>")
    return rules.grammar(f"{prefix}{open_tag} {body} {close_tag}")

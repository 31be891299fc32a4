"""GBNF grammars that force a model's output: JSON by schema, any JSON object, one tool call.

JSON schemas are converted by llama-cpp-python's own ``SchemaConverter`` (the port of
llama.cpp's ``json_schema_to_grammar.py``), so the grammars match what llama.cpp expects;
its ``pattern`` strings first go through ``schema_patterns``.
Forced tool calls are built in ``call_grammars``. Every builder can prefix a bounded reasoning
section for prompts that open one: the model may think briefly, must close it, and the
result still parses. Every grammar's start rule is ``root``.
"""

from __future__ import annotations

import functools
import importlib.util
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from jupyter_superfluid.chat.schema_patterns import pattern_for_grammar
from jupyter_superfluid.chat.syntax.model import ReasoningSyntax

DEFAULT_REASONING_CHARS = 256
THINK = ReasoningSyntax("<think>", "</think>", gap="\n\n")

# llama-cpp-python's converter lets raw control characters into strings (its `char` is
# [^"\\]); JSON forbids them, and json.loads would reject what the model was forced to
# write, so strings use the stricter character class of llama.cpp's own json.gbnf. The
# sampler also takes any 4-byte UTF-8 shape as a character: surrogates and code points
# past U+10FFFF are left out, as they decode to no text.
_NOT_TEXT = r"\uD800-\uDFFF\U00110000-\U001FFFFF"
_JSON_TEXT_CHAR = rf'[^"\\\x7F\x00-\x1F{_NOT_TEXT}]'
_STRICT_CHAR = (
    rf'{_JSON_TEXT_CHAR} | "\\" (["\\/bfnrt] | '
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


def gbnf_not(chars: str) -> str:
    """A GBNF class of any character but ``chars`` (and control characters)."""
    escaped = "".join("\\" + c if c in "]\\^-" else c for c in dict.fromkeys(chars))
    escaped = escaped.replace("\n", "\\n").replace("\t", "\\t").replace("\r", "\\r")
    return f"[^{escaped}\\x00-\\x08\\x0B-\\x1F{_NOT_TEXT}]"


@functools.cache
def _schema_converter_class() -> Any:
    """llama-cpp-python's ``SchemaConverter``, without loading the native library.

    ``llama_cpp.llama_grammar`` is plain Python (stdlib only), but importing it through
    its package runs ``llama_cpp/__init__``, which loads libllama into this process: the
    server process that must never hold llama.cpp. So the module is loaded from its
    file, under a private name.
    """
    spec = importlib.util.find_spec("llama_cpp")  # finds the package without importing it
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("llama-cpp-python is not installed")
    path = Path(next(iter(spec.submodule_search_locations))) / "llama_grammar.py"
    module_spec = importlib.util.spec_from_file_location("_superfluid_llama_grammar", path)
    assert module_spec is not None and module_spec.loader is not None
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)

    class Converter(module.SchemaConverter):  # type: ignore[name-defined,misc]
        """The converter, given each ``pattern`` in the regex subset it translates right."""

        def _visit_pattern(self, pattern: str, name: str) -> str:
            return str(super()._visit_pattern(pattern_for_grammar(pattern), name))

    return Converter


class Rules:
    """Rules from JSON schemas (through llama-cpp-python's converter) plus our own."""

    def __init__(self) -> None:
        self._converter = _schema_converter_class()(
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

    def grammar(self, root: str, *, indented: bool = False) -> str:
        """The whole grammar text with ``root ::= <root>`` (``indented``: JSON spacing may
        break lines, as llama.cpp's own converter allows, for templates that indent)."""
        # The converter keeps its rules in a private dict; it has no public way to
        # replace a built-in rule, and `char` must be the strict one (see _STRICT_CHAR).
        rules: dict[str, str] = dict(self._converter._rules)
        if "char" in rules:
            rules["char"] = _STRICT_CHAR
        if "dot" in rules:  # a pattern's "." (its own allows a raw quote or control)
            rules["dot"] = _JSON_TEXT_CHAR
        if indented and "space" in rules:
            rules["space"] = '| " " | "\\n" [ \\t]{0,20}'
        rules.update(self._extra)
        rules["root"] = root
        return "\n".join(f"{name} ::= {rule}" for name, rule in sorted(rules.items())) + "\n"


def reasoning_prefix(rules: Rules, reasoning: ReasoningSyntax | None, chars: int) -> str:
    """The rule sequence to put before the forced output ("" without reasoning)."""
    if reasoning is None or not reasoning.close:
        return ""
    # No character that starts the closing marker, so the reasoning cannot fake or cut
    # it; bounded so a forced model reaches the answer.
    rules.add("reasoning-text", f"{gbnf_not(reasoning.close[0] + '<')}{{0,{chars}}}")
    rules.add("reasoning", f"reasoning-text {gbnf_literal(reasoning.close + reasoning.gap)}")
    return "reasoning "


def json_schema_grammar(
    schema: Mapping[str, Any],
    *,
    reasoning: ReasoningSyntax | None = None,
    reasoning_chars: int = DEFAULT_REASONING_CHARS,
) -> str:
    """A grammar for one JSON value matching ``schema`` (optionally after brief reasoning)."""
    rules = Rules()
    prefix = reasoning_prefix(rules, reasoning, reasoning_chars)
    value = rules.schema(schema, "json")
    return rules.grammar(prefix + value)


def json_object_grammar(
    *, reasoning: ReasoningSyntax | None = None, reasoning_chars: int = DEFAULT_REASONING_CHARS
) -> str:
    """A grammar for any one JSON object (optionally after brief reasoning)."""
    return json_schema_grammar(_ANY_OBJECT, reasoning=reasoning, reasoning_chars=reasoning_chars)

"""GBNF builders, checked by llama.cpp's own grammar parser and grammar sampler."""

from __future__ import annotations

import json

import pytest

from jupyter_superfluid.builtin_models.templates import QWEN3
from jupyter_superfluid.chat.call_grammars import tool_call_grammar
from jupyter_superfluid.chat.codec import ChatCodec
from jupyter_superfluid.chat.grammars import (
    THINK,
    gbnf_literal,
    json_object_grammar,
    json_schema_grammar,
)
from jupyter_superfluid.chat.types import ItemDone, OutputItem, ToolSpec

# Every keyword the converter must handle. Properties come out in schema order, the
# required ones first, as llama.cpp's converter writes objects.
SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "age": {"type": "integer"},
        "score": {"type": "number"},
        "ok": {"type": "boolean"},
        "none": {"type": "null"},
        "kind": {"enum": ["cat", "dog"]},
        "version": {"const": 2},
        "tags": {"type": "array", "items": {"type": "string"}},
        "id": {"anyOf": [{"type": "integer"}, {"type": "string"}]},
        "pet": {
            "oneOf": [
                {"type": "object", "properties": {"legs": {"type": "integer"}}},
                {"type": "null"},
            ]
        },
    },
    "required": ["name", "age", "score", "ok", "none", "kind", "version", "tags", "id"],
    "additionalProperties": False,
}
VALID = {
    "name": 'Ada \u00e9 \\ "q"',
    "age": 36,
    "score": -1.5e3,
    "ok": True,
    "none": None,
    "kind": "cat",
    "version": 2,
    "tags": ["a", "b"],
    "id": "x1",
}
WEATHER = ToolSpec(
    name="get_weather",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        "required": ["city"],
        "additionalProperties": False,
    },
)
LOOKUP = ToolSpec(name="lookup", namespace="geo")
TOOLS = (WEATHER, LOOKUP)
PARIS = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
OSLO = '<tool_call>\n{"name": "geo.lookup", "arguments": {"q": [1, 2]}}\n</tool_call>'


def test_schema_grammar_parses_and_matches_valid_json(grammar_checker) -> None:
    grammar = json_schema_grammar(SCHEMA)
    assert grammar_checker.parses(grammar)
    assert grammar_checker.matches(grammar, json.dumps(VALID, ensure_ascii=False))
    assert grammar_checker.matches(grammar, json.dumps(VALID, separators=(",", ":")))
    with_pet = {**VALID, "pet": {"legs": 4}}
    assert grammar_checker.matches(grammar, json.dumps(with_pet))
    assert grammar_checker.matches(grammar, json.dumps({**VALID, "id": 7, "pet": None}))


@pytest.mark.parametrize(
    "bad",
    [
        {k: v for k, v in VALID.items() if k != "age"},  # a required property missing
        {**VALID, "kind": "cow"},  # not in the enum
        {**VALID, "version": 3},  # not the const
        {**VALID, "age": 1.5},  # not an integer
        {**VALID, "extra": 1},  # additionalProperties false
        {**VALID, "name": "two\nlines"},  # escaped by json.dumps, so made raw below
    ],
)
def test_schema_grammar_rejects_invalid_json(grammar_checker, bad) -> None:
    grammar = json_schema_grammar(SCHEMA)
    text = json.dumps(bad).replace("\\n", "\n")  # a raw control character is not JSON
    assert not grammar_checker.matches(grammar, text)


def test_scalar_and_array_schemas(grammar_checker) -> None:
    grammar = json_schema_grammar({"type": "array", "items": {"type": "integer"}, "maxItems": 2})
    assert grammar_checker.parses(grammar)
    assert grammar_checker.matches(grammar, "[1, 2]")
    assert not grammar_checker.matches(grammar, "[1, 2, 3]")
    text_grammar = json_schema_grammar({"type": "string"})
    assert grammar_checker.matches(text_grammar, '"hi"')
    assert not grammar_checker.matches(text_grammar, "hi")


def test_unsupported_schema_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="unsupported JSON schema"):
        json_schema_grammar({"type": "date-ish"})


def test_object_grammar(grammar_checker) -> None:
    grammar = json_object_grammar()
    assert grammar_checker.parses(grammar)
    assert grammar_checker.matches(grammar, '{"a": [1, {"b": null}], "c": "d"}')
    assert grammar_checker.matches(grammar, "{}")
    assert not grammar_checker.matches(grammar, "[1]")
    assert not grammar_checker.matches(grammar, '"x"')


def test_tool_call_grammar_forces_one_call(grammar_checker) -> None:
    grammar = tool_call_grammar(TOOLS)
    assert grammar_checker.parses(grammar)
    assert grammar_checker.matches(grammar, PARIS)
    assert grammar_checker.matches(grammar, OSLO)
    assert not grammar_checker.matches(grammar, PARIS.replace('"Paris"', "1"))  # wrong type
    assert not grammar_checker.matches(grammar, PARIS.replace("get_weather", "get_time"))
    assert not grammar_checker.matches(grammar, "Sure. " + PARIS)
    assert not grammar_checker.matches(grammar, PARIS + "\n" + OSLO)


def test_named_tool_choice_allows_only_that_tool(grammar_checker) -> None:
    grammar = tool_call_grammar(TOOLS, only="geo.lookup")
    assert grammar_checker.parses(grammar)
    assert grammar_checker.matches(grammar, OSLO)
    assert not grammar_checker.matches(grammar, PARIS)
    with pytest.raises(ValueError, match="no tool named"):
        tool_call_grammar(TOOLS, only="lookup")


def test_reasoning_prefix_is_bounded_and_tag_free(grammar_checker) -> None:
    grammar = tool_call_grammar(TOOLS, reasoning=True, reasoning_chars=256)
    assert grammar_checker.parses(grammar)
    assert grammar_checker.matches(grammar, "Let me check.\n</think>\n\n" + PARIS)
    assert grammar_checker.matches(grammar, "</think>\n\n" + PARIS)
    assert grammar_checker.matches(grammar, "x" * 256 + "</think>\n\n" + PARIS)
    assert not grammar_checker.matches(grammar, "x" * 257 + "</think>\n\n" + PARIS)
    assert not grammar_checker.matches(grammar, "a <b>\n</think>\n\n" + PARIS)
    assert not grammar_checker.matches(grammar, PARIS)  # the open <think> must be closed
    assert grammar_checker.matches(json_object_grammar(reasoning=THINK), '</think>\n\n{"a": 1}')
    schema_grammar = json_schema_grammar(SCHEMA, reasoning=THINK)
    assert grammar_checker.matches(schema_grammar, "ok\n</think>\n\n" + json.dumps(VALID))
    assert not grammar_checker.matches(schema_grammar, json.dumps(VALID))


def test_forced_outputs_parse_back_into_items(grammar_checker) -> None:
    grammar = tool_call_grammar(TOOLS, reasoning=True)
    output = "Check Oslo.\n</think>\n\n" + OSLO
    assert grammar_checker.matches(grammar, output)
    codec = ChatCodec(QWEN3, eos_token="<|im_end|>")
    parser = codec.output_parser(TOOLS, opens_reasoning=True, call_ids=lambda i: "call_x")
    events = parser.feed(output) + parser.finish()
    done = [e.item for e in events if isinstance(e, ItemDone)]
    assert done == [
        OutputItem("reasoning", "Check Oslo."),
        OutputItem(
            "function_call", '{"q":[1,2]}', call_id="call_x", name="lookup", namespace="geo"
        ),
    ]


def test_gbnf_literal_escapes(grammar_checker) -> None:
    text = 'a "quoted" \\ back\nslash\ttab'
    grammar = f"root ::= {gbnf_literal(text)}"
    assert grammar_checker.parses(grammar)
    assert grammar_checker.matches(grammar, text)


# (pattern, values it matches, values it does not): each value's JSON text is what the
# model writes; the grammar must take the first and refuse the second.
PATTERNS = [
    (r"^\d{3}-[a-z]+$", ["123-abc"], ["12-abc", "abc-123"]),
    (r"^\d+\.\d+$", ["3.14", "10.0"], ["3x14", "3."]),
    (r"[\w.-]+@example\.com", ["mail bob.k@example.com now"], ["bob@exampleXcom"]),
    (r"^\D\S\W$", ["xy!"], ["1y!", "xy1"]),
    (r"^\s\d$", [" 7"], ["\t7"]),  # \s: the space (a tab needs an escape no class holds)
    (r'^a\\b "q"$', ['a\\b "q"'], ["ab q"]),
    (r"^[^a-z]+$", ["ABC 1"], ["abc"]),
    (r"^a.c$", ["abc", "a c"], ["ac"]),
    (r"^\$\^\.\/\-\(x\)$", ["$^./-(x)"], ["$^./-x"]),
    (r"^ab", ["abc", "ab"], ["xab"]),
    (r"yz$", ["xyz"], ["yzx"]),
    ("", ["", "anything"], []),
    (r"^(a|b|)c$", ["c", "ac"], ["abc"]),  # an empty alternative (vLLM's xgrammar refuses)
    (r"^a\tb\nc$", ["a\tb\nc"], ["a b c"]),  # as JSON escapes: raw, they are not JSON
]


@pytest.mark.parametrize(("pattern", "good", "bad"), PATTERNS)
def test_patterns_become_grammars_of_their_json_strings(grammar_checker, pattern, good, bad):
    grammar = json_schema_grammar({"type": "string", "pattern": pattern})
    assert grammar_checker.parses(grammar), grammar
    for value in good:
        assert grammar_checker.matches(grammar, json.dumps(value)), (value, grammar)
    for value in bad:
        assert not grammar_checker.matches(grammar, json.dumps(value)), (value, grammar)


@pytest.mark.parametrize("pattern", [r"^[^a-z]+$", r"^\W+$", r"^a.c$", r"^\S\S\S$"])
def test_no_pattern_lets_a_raw_quote_or_control_into_the_string(grammar_checker, pattern):
    grammar = json_schema_grammar({"type": "string", "pattern": pattern})
    for raw in ('"A"C"', '"a\nc"', '"a\\c"'):  # not JSON: a bare quote, newline, backslash
        assert not grammar_checker.matches(grammar, raw), (raw, grammar)

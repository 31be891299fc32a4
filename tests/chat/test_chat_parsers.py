"""Output parsers: whole event sequences for streamed text, reasoning and tool calls.

These run the parser of the tiny Qwen3 template's derived syntax (Hermes ``<tool_call>``
JSON, ``<think>`` reasoning); ``test_chat_families.py`` has every other family.
"""

from __future__ import annotations

import random
from collections.abc import Iterable

import pytest

from jupyter_superfluid.builtin_models.templates import CHATML, QWEN3
from jupyter_superfluid.chat.codec import ChatCodec
from jupyter_superfluid.chat.parsers import OutputParser
from jupyter_superfluid.chat.syntax.markers import overlap
from jupyter_superfluid.chat.types import (
    ChatEvent,
    ItemDone,
    ItemStarted,
    OutputItem,
    TextDelta,
    ToolSpec,
)

TOOLS = (ToolSpec(name="get_weather"), ToolSpec(name="lookup", namespace="geo"))


def call_id(index: int) -> str:
    return f"call_{index}"


QWEN3_CODEC = ChatCodec(QWEN3, eos_token="<|im_end|>")


def hermes(opens_reasoning: bool = False) -> OutputParser:
    return QWEN3_CODEC.output_parser(TOOLS, opens_reasoning=opens_reasoning, call_ids=call_id)


def run(parser, deltas: Iterable[str], truncated: bool = False) -> list[ChatEvent]:
    events: list[ChatEvent] = []
    for delta in deltas:
        events += parser.feed(delta)
    return events + parser.finish(truncated=truncated)


def message(index: int, *deltas: str, complete: bool = True) -> list[ChatEvent]:
    return [
        ItemStarted(index, "message"),
        *(TextDelta(index, "message", d) for d in deltas),
        ItemDone(index, OutputItem("message", "".join(deltas), complete=complete)),
    ]


def reasoning(index: int, *deltas: str) -> list[ChatEvent]:
    return [
        ItemStarted(index, "reasoning"),
        *(TextDelta(index, "reasoning", d) for d in deltas),
        ItemDone(index, OutputItem("reasoning", "".join(deltas))),
    ]


def call(index: int, name: str, args: str, ns: str | None = None, complete: bool = True):
    fields = {"call_id": f"call_{index}", "name": name, "namespace": ns}
    return [
        ItemStarted(index, "function_call", **fields),
        TextDelta(index, "function_call", args),
        ItemDone(index, OutputItem("function_call", args, complete=complete, **fields)),
    ]


def test_plain_text_streams_char_by_char() -> None:
    text = "Hi, a < b!"
    assert run(hermes(), [*text, *"<|im_end|>"]) == message(0, *"Hi, a ", "< ", *"b!")


def test_each_delta_is_emitted_at_once_unless_it_may_start_a_tag() -> None:
    parser = hermes()
    assert parser.feed("Hello") == [ItemStarted(0, "message"), TextDelta(0, "message", "Hello")]
    assert parser.feed(" <tool") == [TextDelta(0, "message", " ")]
    assert parser.feed("s>") == [TextDelta(0, "message", "<tools>")]


def test_reasoning_then_text_when_the_prompt_opened_think() -> None:
    deltas = ["Think", " hard", ".\n", "</think>", "\n\n", "Answer", ".", "<|im_end|>"]
    assert run(hermes(opens_reasoning=True), deltas) == [
        *reasoning(0, "Think", " hard", "."),
        *message(1, "Answer", "."),
    ]


def test_reasoning_opened_by_the_model() -> None:
    deltas = ["<think>", "\n", "Hmm", "\n", "ok", "\n", "</think>", "\n\n", "Yes", "<|im_end|>"]
    assert run(hermes(), deltas) == [*reasoning(0, "Hmm", "\nok"), *message(1, "Yes")]


def test_tool_call() -> None:
    deltas = [
        "<tool_call>",
        "\n",
        '{"name": "get_weather", ',
        '"arguments": {"city": ',
        '"Paris", "days": [1, 2]}}',
        "\n",
        "</tool_call>",
        "<|im_end|>",
    ]
    assert run(hermes(), deltas) == call(0, "get_weather", '{"city":"Paris","days":[1,2]}')


def test_namespaced_tool_call_maps_back_to_its_namespace() -> None:
    text = '<tool_call>\n{"name": "geo.lookup", "arguments": {"q": "Oslo"}}\n</tool_call>'
    assert run(hermes(), [text]) == call(0, "lookup", '{"q":"Oslo"}', ns="geo")


def test_unknown_dotted_name_stays_whole() -> None:
    text = '<tool_call>\n{"name": "x.y", "arguments": {}}\n</tool_call>'
    assert run(hermes(), [text]) == call(0, "x.y", "{}")


def test_reasoning_text_and_two_tool_calls() -> None:
    text = (
        "Plan.\n</think>\n\nChecking both.\n"
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n'
        '<tool_call>\n{"name": "geo.lookup", "arguments": "{\\"q\\": \\"Oslo\\"}"}\n</tool_call>'
        "<|im_end|>"
    )
    assert run(hermes(opens_reasoning=True), [text]) == [
        *reasoning(0, "Plan."),
        *message(1, "Checking both."),
        *call(2, "get_weather", '{"city":"Paris"}'),
        *call(3, "lookup", '{"q":"Oslo"}', ns="geo"),
    ]


def test_truncated_tool_call_is_incomplete() -> None:
    deltas = ["<tool_call>", '\n{"name": "geo.lookup", ', '"arguments": {"q": "Os']
    events = run(hermes(), deltas, truncated=True)
    assert events == call(0, "lookup", '{"q": "Os', ns="geo", complete=False)


def test_a_call_truncated_before_its_name_is_whole_is_nothing() -> None:
    # No function_call without a name (nothing to run, no valid input item), and its
    # markup is not message text.
    for deltas in (["<tool_call>", '\n{"na'], ["<tool_call>", '\n{"name": "get_wea']):
        assert run(hermes(), deltas, truncated=True) == []
    named = run(hermes(), ["<tool_call>", '\n{"name": "get_weather", '], truncated=True)
    fields = {"call_id": "call_0", "name": "get_weather", "namespace": None}
    assert named == [
        ItemStarted(0, "function_call", **fields),
        ItemDone(0, OutputItem("function_call", "", complete=False, **fields)),
    ]


def test_a_forced_call_truncated_in_its_opening_is_nothing() -> None:
    forced = QWEN3_CODEC.output_parser(TOOLS, call_ids=call_id, forced_call=True)
    assert run(forced, ["<tool", "_c"], truncated=True) == []
    # Unforced, the same text may be the reply's own: it stays message text.
    assert run(hermes(), ["<tool", "_c"], truncated=True) == message(0, "<tool_c", complete=False)
    # A forced call's reasoning is kept as usual.
    forced = QWEN3_CODEC.output_parser(
        TOOLS, call_ids=call_id, forced_call=True, opens_reasoning=True
    )
    assert run(forced, ["Plan.", "</think>\n\n<tool"], truncated=True) == reasoning(0, "Plan.")


def test_truncated_message_is_incomplete() -> None:
    assert run(hermes(), ["Once upon"], truncated=True) == message(0, "Once upon", complete=False)


def test_malformed_tool_call_becomes_message_text() -> None:
    text = '<tool_call>\n{"name": "get_weather", "arguments": {oops}\n</tool_call><|im_end|>'
    raw = '<tool_call>\n{"name": "get_weather", "arguments": {oops}\n</tool_call>'
    assert run(hermes(), [text]) == message(0, raw)


def test_unclosed_tool_call_at_end_of_turn() -> None:
    good = '<tool_call>\n{"name": "get_weather", "arguments": {}}<|im_end|>'
    assert run(hermes(), [good]) == call(0, "get_weather", "{}")
    bad = '<tool_call>\n{"name": "get_weather", "arg'
    assert run(hermes(), [bad]) == message(0, bad)


def test_tags_split_across_deltas() -> None:
    deltas = [
        "<thi",
        "nk>\nab",
        "c</th",
        "ink>\n\nx<tool_",
        'call>\n{"name": "get_weather", "argu',
        'ments": {}}\n</tool',
        "_call><|im_",
        "end|>",
    ]
    assert run(hermes(), deltas) == [
        *reasoning(0, "ab", "c"),
        *message(1, "x"),
        *call(2, "get_weather", "{}"),
    ]


@pytest.mark.parametrize("end", ["<|im_end|>", "<|endoftext|>"])
def test_end_of_turn_is_stripped_and_what_follows_ignored(end: str) -> None:
    assert run(hermes(), ["Done.", end, "more text"]) == message(0, "Done.")


def test_codec_eos_token_ends_the_turn() -> None:
    codec = ChatCodec(CHATML, eos_token="</s>")
    parser = codec.output_parser()
    assert run(parser, ["Bye", "</", "s>", "junk"]) == message(0, "Bye")


def test_the_parser_follows_what_the_template_renders() -> None:
    chatml, qwen3 = ChatCodec(CHATML, eos_token="<|im_end|>"), ChatCodec(QWEN3)
    # ChatML never gave tags a meaning: they stay text, and without tools so do calls.
    text = "<think>a</think><tool_call>{}</tool_call>"
    assert run(chatml.output_parser(), [text, "<|im_end|>"]) == message(0, text)
    parser = qwen3.output_parser(TOOLS, opens_reasoning=True, call_ids=call_id)
    assert run(parser, ["a\n</think>\n\nb"]) == [*reasoning(0, "a"), *message(1, "b")]


def test_empty_reasoning_and_blank_text_make_no_items() -> None:
    assert run(hermes(), ["<think>\n\n</think>\n\n", "<|im_end|>"]) == []


def test_items_collects_finished_items() -> None:
    parser = hermes(opens_reasoning=True)
    run(parser, ["r</think>t"])
    assert parser.items == [OutputItem("reasoning", "r"), OutputItem("message", "t")]


def _overlap_by_definition(text: str, markers: tuple[str, ...]) -> int:
    longest = max((len(m) for m in markers), default=1)
    for n in range(min(len(text), longest - 1), 0, -1):
        if any(m.startswith(text[-n:]) for m in markers):
            return n
    return 0


@pytest.mark.parametrize("seed", range(4))
def test_held_back_text_is_the_longest_suffix_that_may_start_a_marker(seed: int) -> None:
    """``overlap`` (asked per streamed token) agrees with its definition on random text."""
    rng = random.Random(seed)
    alphabet = "<|>/_ant\n "
    for _ in range(5000):
        markers = tuple(
            "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 9)))
            for _ in range(rng.randint(0, 4))
        )
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 14)))
        assert overlap(text, markers) == _overlap_by_definition(text, markers), (text, markers)

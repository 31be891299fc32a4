"""Output parsers of real templates on model output written from each family's format.

Each sample is what a model of that family writes (per its model card or reference
parser), fed to the parser of the real template from llama.cpp's corpus in random
(seeded) chunk sizes, so that markers arrive split across chunks.
"""

from __future__ import annotations

import functools
import json
import random

import pytest

from jupyter_superfluid.chat.codec import ChatCodec
from jupyter_superfluid.chat.types import ChatEvent, ItemDone, OutputItem, ToolSpec
from jupyter_superfluid.engine.remote.llama_sources import chat_templates

WEATHER = ToolSpec(
    name="get_weather",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        "required": ["city"],
    },
)
LOOKUP = ToolSpec(name="lookup", namespace="geo", parameters={"type": "object"})
TOOLS = (WEATHER, LOOKUP)
SEEDS = range(6)


@functools.cache
def codec(name: str) -> ChatCodec:
    path = next(p for p in chat_templates() if p.name == name)
    return ChatCodec(path.read_text(), bos_token="<s>", eos_token="</s>")


def chunks(text: str, seed: int) -> list[str]:
    """``text`` cut at random places (1 to 7 characters a piece)."""
    rng = random.Random(seed)
    out, at = [], 0
    while at < len(text):
        step = rng.randint(1, 7)
        out.append(text[at : at + step])
        at += step
    return out


def parse(name: str, text: str, seed: int, *, opens: bool = False) -> list[OutputItem]:
    parser = codec(name).output_parser(
        TOOLS, opens_reasoning=opens, end_tokens=("</s>",), call_ids=lambda i: f"call_{i}"
    )
    events: list[ChatEvent] = []
    for piece in chunks(text, seed):
        events += parser.feed(piece)
    events += parser.finish()
    return [e.item for e in events if isinstance(e, ItemDone)]


def text(kind: str, value: str) -> OutputItem:
    return OutputItem(kind, value)  # type: ignore[arg-type]


def call(index: int, args: dict, name: str = "get_weather", call_id: str | None = None):
    namespace = "geo" if name == "lookup" else None
    arguments = json.dumps(args, separators=(",", ":"))
    return OutputItem(
        "function_call",
        arguments,
        call_id=call_id or f"call_{index}",
        name=name,
        namespace=namespace,
    )


PARIS = {"city": "Paris", "days": 3}
CASES = [
    (
        "meta-llama-Llama-3.1-8B-Instruct.jinja",
        '{"name": "get_weather", "parameters": {"city": "Paris", "days": 3}}<|eot_id|>',
        [call(0, PARIS)],
    ),
    (
        "Mistral-Small-3.2-24B-Instruct-2506.jinja",
        'Checking.[TOOL_CALLS]get_weather[CALL_ID]a1B2c3D4e[ARGS]{"city": "Paris", "days": 3}'
        '[TOOL_CALLS]geo.lookup[CALL_ID]Zz9Yy8Xx7[ARGS]{"q": "Oslo"}</s>',
        [
            text("message", "Checking."),
            call(1, PARIS, call_id="a1B2c3D4e"),
            call(2, {"q": "Oslo"}, name="lookup", call_id="Zz9Yy8Xx7"),
        ],
    ),
    (
        "mistralai-Mistral-Nemo-Instruct-2407.jinja",
        '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}, '
        '"id": "a1B2c3D4e"}]</s>',
        [call(0, PARIS, call_id="a1B2c3D4e")],
    ),
    (
        "mistralai-Ministral-3-14B-Reasoning-2512.jinja",
        '[THINK]The user wants weather.[/THINK][TOOL_CALLS]get_weather[ARGS]{"city": "Paris", '
        '"days": 3}</s>',
        [text("reasoning", "The user wants weather."), call(1, PARIS)],
    ),
    (
        "Qwen3-Coder.jinja",
        "Let me check.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n"
        "</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call><|im_end|>",
        [text("message", "Let me check."), call(1, PARIS)],
    ),
    (
        "Qwen-Qwen2.5-7B-Instruct.jinja",
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}\n'
        '</tool_call>\n<tool_call>\n{"name": "geo.lookup", "arguments": {"q": "Oslo"}}\n'
        "</tool_call><|im_end|>",
        [call(0, PARIS), call(1, {"q": "Oslo"}, name="lookup")],
    ),
    (
        "GLM-4.6.jinja",
        "\n<think>Look it up.</think>\nSure.\n<tool_call>get_weather\n<arg_key>city</arg_key>\n"
        "<arg_value>Paris</arg_value>\n<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n"
        "</tool_call><|user|>",
        [text("reasoning", "Look it up."), text("message", "Sure."), call(2, PARIS)],
    ),
    (
        "deepseek-ai-DeepSeek-V3.1.jinja",
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>"
        '{"city": "Paris", "days": 3}<｜tool▁call▁end｜><｜tool▁calls▁end｜><｜end▁of▁sentence｜>',
        [call(0, PARIS)],
    ),
    (
        "deepseek-ai-DeepSeek-V3.2.jinja",
        'Sure.\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name="get_weather">\n'
        '<｜DSML｜parameter name="city" string="true">Paris</｜DSML｜parameter>\n'
        '<｜DSML｜parameter name="days" string="false">3</｜DSML｜parameter>\n'
        "</｜DSML｜invoke>\n</｜DSML｜function_calls><｜end▁of▁sentence｜>",
        [text("message", "Sure."), call(1, PARIS)],
    ),
    (
        "moonshotai-Kimi-K2.jinja",
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
        '<|tool_call_argument_begin|>{"city": "Paris", "days": 3}<|tool_call_end|>'
        "<|tool_calls_section_end|><|im_end|>",
        [call(0, PARIS)],
    ),
    (
        "google-gemma-4-31B-it.jinja",
        '<|tool_call>call:get_weather{city:<|"|>Paris<|"|>,days:3}<tool_call|><|tool_response>',
        [call(0, PARIS)],
    ),
    (
        "LFM2.5-8B-A1B.jinja",
        "<|tool_call_start|>[get_weather(city='Paris', days=3)]<|tool_call_end|><|im_end|>",
        [call(0, PARIS)],
    ),
    (
        "CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja",
        '<|START_ACTION|>[\n    {"tool_call_id": "0", "tool_name": "get_weather", '
        '"parameters": {"city": "Paris", "days": 3}}\n]<|END_ACTION|><|END_OF_TURN_TOKEN|>',
        [call(0, PARIS)],
    ),
    (
        "meetkai-functionary-medium-v3.1.jinja",
        '<function=get_weather>{"city": "Paris", "days": 3}</function><|eom_id|>',
        [call(0, PARIS)],
    ),
    (
        "MiniMax-M2.jinja",
        '<minimax:tool_call>\n<invoke name="get_weather">\n<parameter name="city">Paris'
        '</parameter>\n<parameter name="days">3</parameter>\n</invoke>\n</minimax:tool_call>[e~[',
        [call(0, PARIS)],
    ),
    (
        "upstage-Solar-Open-100B.jinja",
        "<|tool_calls|><|tool_call:begin|>call_77<|tool_call:name|>get_weather"
        '<|tool_call:args|>{"city": "Paris", "days": 3}<|tool_call:end|><|calls|>',
        [call(0, PARIS, call_id="call_77")],
    ),
    (
        "Apertus-8B-Instruct.jinja",
        '<|tools_prefix|>[{"get_weather": {"city": "Paris", "days": 3}}]<|tools_suffix|>',
        [call(0, PARIS)],
    ),
    (
        "google-gemma-2-2b-it.jinja",  # no tool support: the generic JSON format
        '{"tool_call": {"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}}'
        "<end_of_turn>",
        [call(0, PARIS)],
    ),
    (
        "meetkai-functionary-medium-v3.2.jinja",  # after a generation prompt ending in ">>>"
        'all\nChecking.>>>get_weather\n{"city": "Paris", "days": 3}<|eot_id|>',
        [text("message", "Checking."), call(1, PARIS)],
    ),
    (
        "meetkai-functionary-medium-v3.2.jinja",
        'get_weather\n{"city": "Paris", "days": 3}<|eot_id|>',
        [call(0, PARIS)],
    ),
    (
        "upstage-Solar-Open-100B.jinja",
        "<|think|>Hmm.<|end|><|begin|>assistant<|content|>Hi there.<|end|>",
        [text("reasoning", "Hmm."), text("message", "Hi there.")],
    ),
    (
        "Kimi-K3.jinja",
        "<|open|>think<|sep|>Plan.<|close|>think<|sep|><|open|>response<|sep|>Hi."
        "<|close|>response<|sep|><|close|>message<|sep|><|end_of_msg|>",
        [text("reasoning", "Plan."), text("message", "Hi.")],
    ),
    (
        "Kimi-K3.jinja",
        "<|open|>think<|sep|>Plan.<|close|>think<|sep|><|open|>response<|sep|>"
        '<|close|>response<|sep|><|open|>tools<|sep|><|open|>call tool="get_weather" index="1"'
        '<|sep|><|open|>argument key="city" type="string"<|sep|>Paris<|close|>argument<|sep|>'
        '<|open|>argument key="days" type="number"<|sep|>3<|close|>argument<|sep|>'
        "<|close|>call<|sep|><|close|>tools<|sep|><|close|>message<|sep|><|end_of_msg|>",
        [text("reasoning", "Plan."), call(1, PARIS)],
    ),
    (
        "muse-glimmer.jinja",
        " to=self<|message|>Think.<|eom|><|start|>assistant to=user<|message|>Sunny.<|eot|>",
        [text("reasoning", "Think."), text("message", "Sunny.")],
    ),
    (
        "muse-glimmer.jinja",
        ' to=get_weather<|message|><atem:function_calls>\n<atem:invoke name="get_weather">\n'
        '<atem:parameter name="city">Paris</atem:parameter>\n<atem:parameter name="days">3'
        "</atem:parameter>\n</atem:invoke>\n</atem:function_calls><|eot|>",
        [call(0, PARIS)],
    ),
    (
        "openai-gpt-oss-120b.jinja",
        "<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant"
        "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
        '{"city":"Paris","days":3}<|call|>',
        [text("reasoning", "Need the weather."), call(1, PARIS)],
    ),
    (
        "openai-gpt-oss-120b.jinja",
        "<|channel|>analysis<|message|>Say hi.<|end|><|start|>assistant<|channel|>final"
        "<|message|>Hello!<|return|>",
        [text("reasoning", "Say hi."), text("message", "Hello!")],
    ),
]


@pytest.mark.parametrize(("name", "output", "expected"), CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("seed", SEEDS)
def test_family_output_parses_in_any_chunking(name, output, expected, seed) -> None:
    assert parse(name, output, seed) == expected


@pytest.mark.parametrize("seed", SEEDS)
def test_reasoning_opened_by_the_generation_prompt(seed) -> None:
    name = "Qwen3.5-4B.jinja"
    assert codec(name).generation_opens_reasoning({"enable_thinking": True})
    output = (
        "The user wants Paris.\n</think>\n\n<tool_call>\n<function=get_weather>\n"
        "<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call><|im_end|>"
    )
    assert parse(name, output, seed, opens=True) == [
        text("reasoning", "The user wants Paris."),
        call(1, {"city": "Paris"}),
    ]


@pytest.mark.parametrize("seed", SEEDS)
def test_text_streams_with_markers_split(seed) -> None:
    name = "meta-llama-Llama-3.1-8B-Instruct.jinja"
    assert parse(name, "It is sunny in Paris.<|eot_id|>trailing", seed) == [
        text("message", "It is sunny in Paris.")
    ]

"""ChatCodec: exact renders of the two tiny templates, probed properties, effort mapping."""

from __future__ import annotations

import pytest

from jupyter_superfluid.builtin_models.templates import CHATML, QWEN3
from jupyter_superfluid.chat.codec import ChatCodec
from jupyter_superfluid.chat.environment import TemplateRefusal
from jupyter_superfluid.chat.messages import message_dict, tool_dict
from jupyter_superfluid.chat.types import ChatMessage, ToolCall, ToolSpec

WEATHER = ToolSpec(
    name="get_weather",
    description="Weather for a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)
LOOKUP = ToolSpec(name="lookup", namespace="geo", parameters={"type": "object"})
CALL = ToolCall(call_id="call_1", name="lookup", namespace="geo", arguments='{"city":"Oslo"}')

SYSTEM = ChatMessage(role="system", content="Be terse.")
USER = ChatMessage(role="user", content="Hi")


@pytest.fixture(scope="module")
def chatml() -> ChatCodec:
    return ChatCodec(CHATML, eos_token="<|im_end|>")


@pytest.fixture(scope="module")
def qwen3() -> ChatCodec:
    return ChatCodec(QWEN3, eos_token="<|im_end|>")


def test_chatml_renders_exactly(chatml: ChatCodec) -> None:
    messages = [SYSTEM, USER, ChatMessage(role="assistant", content="Hello.")]
    assert chatml.render(messages[:2]) == (
        "<|im_start|>system\nBe terse.<|im_end|>\n"
        "<|im_start|>user\nHi<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    assert chatml.render(messages, add_generation_prompt=False) == (
        "<|im_start|>system\nBe terse.<|im_end|>\n"
        "<|im_start|>user\nHi<|im_end|>\n"
        "<|im_start|>assistant\nHello.<|im_end|>\n"
    )


def test_qwen3_renders_thinking_switch_exactly(qwen3: ChatCodec) -> None:
    assert (
        qwen3.render([USER]) == "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n"
    )
    off = qwen3.render([USER], template_kwargs={"enable_thinking": False})
    assert off == "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"


def test_qwen3_renders_tools_calls_and_results_exactly(qwen3: ChatCodec) -> None:
    messages = [
        SYSTEM,
        USER,
        ChatMessage(role="assistant", reasoning="Look it up.", tool_calls=(CALL,)),
        ChatMessage(role="tool", content="Norway", tool_call_id="call_1"),
    ]
    text = qwen3.render(messages, tools=[WEATHER, LOOKUP])
    tools_json = (
        '{"type": "function", "function": {"name": "get_weather", "description": '
        '"Weather for a city.", "parameters": {"type": "object", "properties": '
        '{"city": {"type": "string"}}}}}\n'
        '{"type": "function", "function": {"name": "geo.lookup", "parameters": '
        '{"type": "object"}}}'
    )
    assert text == (
        "<|im_start|>system\nBe terse.\n\n# Tools\n\nYou may call one or more functions to "
        "assist with the user query.\n\nYou are provided with function signatures within "
        f"<tools></tools> XML tags:\n<tools>\n{tools_json}\n</tools>\n\n"
        "For each function call, return a json object with function name and arguments "
        "within <tool_call></tool_call> XML tags:\n<tool_call>\n"
        '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n'
        "<|im_start|>user\nHi<|im_end|>\n"
        "<|im_start|>assistant\n<think>\nLook it up.\n</think>\n\n"
        '<tool_call>\n{"name": "geo.lookup", "arguments": {"city": "Oslo"}}\n</tool_call>'
        "<|im_end|>\n"
        "<|im_start|>user\n<tool_response>\nNorway\n</tool_response><|im_end|>\n"
        "<|im_start|>assistant\n<think>\n"
    )


def test_qwen3_drops_reasoning_of_earlier_turns(qwen3: ChatCodec) -> None:
    reply = ChatMessage(role="assistant", content="Hello.", reasoning="Greet back.")
    last = qwen3.render([USER, reply], add_generation_prompt=False)
    assert "<think>\nGreet back.\n</think>\n\nHello." in last
    later = qwen3.render([USER, reply, USER], add_generation_prompt=False)
    assert "Greet back." not in later
    assert not later.startswith(last)


def test_message_and_tool_dicts_are_hf_style() -> None:
    message = ChatMessage(role="assistant", content="", reasoning="r", tool_calls=(CALL,))
    assert message_dict(message) == {
        "role": "assistant",
        "content": "",
        "reasoning_content": "r",
        "tool_calls": [
            {
                "type": "function",
                "id": "call_1",
                "function": {"name": "geo.lookup", "arguments": {"city": "Oslo"}},
            }
        ],
    }
    result = ChatMessage(role="tool", content="x", tool_call_id="call_1")
    assert message_dict(result) == {"role": "tool", "content": "x", "tool_call_id": "call_1"}
    assert tool_dict(LOOKUP) == {
        "type": "function",
        "function": {"name": "geo.lookup", "parameters": {"type": "object"}},
    }


def test_environment_matches_hf_helpers() -> None:
    codec = ChatCodec(
        "{{ messages[0] | tojson }}|{{ messages[0] | tojson(indent=1) | length > 30 }}"
        "|{{ strftime_now('%Y') | length }}"
        "{% if messages | length > 1 %}{{ raise_exception('only one') }}{% endif %}"
    )
    text = codec.render([ChatMessage(role="user", content="é<b>")], add_generation_prompt=False)
    # Non-ASCII kept and no HTML escaping, as HF's tojson does.
    assert text == '{"role": "user", "content": "é<b>"}|True|4'
    with pytest.raises(TemplateRefusal, match="only one"):
        codec.render([USER, USER])


def test_generation_block_is_accepted() -> None:
    template = (
        "{% for m in messages %}{% if m.role == 'assistant' %}{% generation %}"
        "{{ m.content }}{% endgeneration %}{% else %}{{ m.content }}{% endif %}{% endfor %}"
    )
    codec = ChatCodec(template)
    reply = ChatMessage(role="assistant", content="B")
    assert codec.render([USER, reply], add_generation_prompt=False) == "HiB"


def test_probes_of_the_tiny_templates(chatml: ChatCodec, qwen3: ChatCodec) -> None:
    assert chatml.renders_per_message is True
    assert chatml.has_thinking_switch is False
    assert chatml.supports_tools is False
    assert chatml.reasoning_efforts == ()
    assert qwen3.renders_per_message is False
    assert qwen3.has_thinking_switch is True
    assert qwen3.supports_tools is True
    assert qwen3.reasoning_efforts == ()


def test_probe_finds_reasoning_effort_levels() -> None:
    listed = (
        "{% if reasoning_effort in ['low', 'high'] %}[{{ reasoning_effort }}]{% endif %}"
        "{% for m in messages %}{{ m.content }}{% endfor %}"
    )
    assert ChatCodec(listed).reasoning_efforts == ("low", "high")
    pasted = "Reasoning: {{ reasoning_effort | default('medium') }}{{ messages[-1].content }}"
    assert ChatCodec(pasted).reasoning_efforts == ("low", "medium", "high")


@pytest.mark.parametrize(
    ("effort", "expected"),
    [
        (None, {}),
        ("none", {"enable_thinking": False}),
        ("minimal", {"enable_thinking": False}),
        ("low", {"enable_thinking": True}),
        ("medium", {"enable_thinking": True}),
        ("high", {"enable_thinking": True}),
    ],
)
def test_effort_maps_to_thinking_switch(qwen3: ChatCodec, effort, expected) -> None:
    assert qwen3.template_kwargs_for_effort(effort) == expected


@pytest.mark.parametrize("effort", [None, "none", "low", "high"])
def test_effort_is_ignored_without_switch_or_levels(chatml: ChatCodec, effort) -> None:
    assert chatml.template_kwargs_for_effort(effort) == {}


def test_effort_prefers_listed_levels_over_the_switch() -> None:
    template = (
        "{% if reasoning_effort == 'high' %}H{% endif %}"
        "{% if enable_thinking is false %}off{% endif %}{{ messages[-1].content }}"
    )
    codec = ChatCodec(template)
    assert codec.reasoning_efforts == ("high",)
    assert codec.has_thinking_switch
    assert codec.template_kwargs_for_effort("high") == {"reasoning_effort": "high"}
    assert codec.template_kwargs_for_effort("minimal") == {"enable_thinking": False}
    assert codec.template_kwargs_for_effort("low") == {"enable_thinking": True}


def test_generation_opens_reasoning(chatml: ChatCodec, qwen3: ChatCodec) -> None:
    assert qwen3.generation_opens_reasoning() is True
    assert qwen3.generation_opens_reasoning({"enable_thinking": True}) is True
    assert qwen3.generation_opens_reasoning({"enable_thinking": False}) is False
    assert chatml.generation_opens_reasoning() is False

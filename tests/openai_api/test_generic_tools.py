"""Models whose template has no tool support call tools through the generic format.

``superfluid/tiny-chatml``, ``tiny-vision`` and ``tiny-audio`` carry plain ChatML: the
tools are described in the system text, a grammar forces the JSON call, and the parser
reads it back, so a required or named tool choice is never silently ignored.
"""

from __future__ import annotations

import json

import openai
import pytest
from support.no_eos import NO_EOS_WIRE

GENERIC = ("superfluid/tiny-chatml", "superfluid/tiny-vision", "superfluid/tiny-audio")
CITY = {
    "type": "object",
    "properties": {"city": {"type": "string", "enum": ["Paris", "Oslo"]}},
    "required": ["city"],
    "additionalProperties": False,
}
WEATHER = {"type": "function", "name": "get_weather", "parameters": CITY}
CLOCK = {"type": "function", "name": "get_time", "parameters": CITY}


@pytest.fixture(scope="module")
def client(sf_model_cache, tmp_path_factory):
    from jupyter_superfluid.pytest_plugin import start_standalone

    server = start_standalone(sf_model_cache, tmp_path_factory.mktemp("generic"), models=GENERIC)
    yield openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0, timeout=120)
    server.stop()


@pytest.mark.parametrize("model", GENERIC)
@pytest.mark.parametrize(
    ("choice", "tool"),
    [("required", "get_weather"), ({"type": "function", "name": "get_time"}, "get_time")],
)
def test_forced_tool_choice_is_a_function_call(client, model, choice, tool) -> None:
    tools = [WEATHER] if choice == "required" else [WEATHER, CLOCK]
    response = client.responses.create(
        model=model,
        input="Weather in Paris?",
        tools=tools,
        tool_choice=choice,
        max_output_tokens=200,
        extra_body={"seed": 3},
    )
    calls = [o for o in response.output if o.type == "function_call"]
    assert [c.name for c in calls] == [tool]
    assert json.loads(calls[0].arguments)["city"] in ("Paris", "Oslo")
    follow = client.responses.create(
        model=model,
        previous_response_id=response.id,
        input=[{"type": "function_call_output", "call_id": calls[0].call_id, "output": "18 C"}],
        max_output_tokens=8,
        extra_body={"seed": 3, "logit_bias": NO_EOS_WIRE},
    )
    assert follow.status == "incomplete" and follow.usage.output_tokens == 8

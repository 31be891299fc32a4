"""Every corpus template through ``/v1/responses``: forced, named and continued calls,
reasoning split and mapped, with the official SDK against a real standalone server.

A tiny random model says nothing meaningful, so the checks are structural: a forced
call comes back as a ``function_call`` item to the tool asked for, with arguments valid
by the tool's schema (the grammar forced them, written the way the template writes
calls, and the parser read them back), and its result continues the conversation.
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from tests.corpus.corpus_models import Servers, corpus, names

# Values from enums: a random byte-level model forced into a free string may write bytes
# that are no UTF-8 (overlong forms the grammar sampler takes); enums keep every value
# one the schema names, in every notation.
CITY = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "enum": ["Paris", "Oslo", "Lima"]},
        "days": {"type": "integer", "enum": [1, 2, 3]},
    },
    "required": ["city", "days"],
    "additionalProperties": False,
}
ZONE = {
    "type": "object",
    "properties": {"zone": {"type": "string", "enum": ["CET", "UTC"]}},
    "required": ["zone"],
    "additionalProperties": False,
}
WEATHER = {"type": "function", "name": "get_weather", "description": "Weather.", "parameters": CITY}
CLOCK = {
    "type": "function",
    "name": "get_time",
    "description": "Time in a zone.",
    "parameters": ZONE,
}
SCHEMAS = {"get_weather": CITY, "get_time": ZONE}
TEMPLATES = names()


@pytest.fixture(scope="session", params=TEMPLATES)
def name(request: pytest.FixtureRequest) -> str:
    """One corpus template: a session fixture, so tests run template by template."""
    return str(request.param)


def calls(response: Any) -> list[Any]:
    return [item for item in response.output if item.type == "function_call"]


SEEDED = {"seed": 7}  # the tiny model's sampling, fixed: each check has one outcome


def forced(client: Any, name: str, **kwargs: Any) -> Any:
    return client.responses.create(
        model=name,
        input="Weather in Paris?",
        max_output_tokens=2000,  # a reasoning prefix, then the call: the grammar ends it
        extra_body=SEEDED,
        **kwargs,
    )


def assert_valid_call(call: Any, tool: str) -> None:
    assert call.name == tool
    assert call.status == "completed"
    jsonschema.validate(json.loads(call.arguments), SCHEMAS[tool])


def test_required_tool_choice_calls_the_tool(corpus_servers: Servers, name: str) -> None:
    client = corpus_servers.client(name)
    response = forced(client, name, tools=[WEATHER], tool_choice="required")
    found = calls(response)
    assert found, f"no function_call in {response.output}"
    assert_valid_call(found[0], "get_weather")


def test_named_tool_choice_calls_that_tool_of_two(corpus_servers: Servers, name: str) -> None:
    client = corpus_servers.client(name)
    choice = {"type": "function", "name": "get_time"}
    response = forced(client, name, tools=[WEATHER, CLOCK], tool_choice=choice)
    found = calls(response)
    assert found, f"no function_call in {response.output}"
    assert_valid_call(found[0], "get_time")


def test_function_call_output_continues(corpus_servers: Servers, name: str) -> None:
    client = corpus_servers.client(name)
    first = forced(client, name, tools=[WEATHER, CLOCK], tool_choice="required")
    call = calls(first)[0]
    result = {"type": "function_call_output", "call_id": call.call_id, "output": "18 C"}
    follow = client.responses.create(
        model=name,
        previous_response_id=first.id,
        input=[result],
        tools=[WEATHER, CLOCK],
        max_output_tokens=24,
        extra_body=SEEDED,
    )
    assert follow.status in ("completed", "incomplete")
    assert follow.previous_response_id == first.id


def test_reasoning_efforts_are_mapped(corpus_servers: Servers, name: str) -> None:
    model = corpus()[name]
    client = corpus_servers.client(name)
    for effort in ("none", "low", "high"):
        kwargs = model.codec.template_kwargs_for_effort(effort)
        response = client.responses.create(
            model=name,
            input="Hi",
            reasoning={"effort": effort},
            max_output_tokens=16,
            extra_body=SEEDED,
        )
        assert response.status in ("completed", "incomplete")
        if model.codec.generation_opens_reasoning(kwargs) and response.output:
            # The prompt leaves the model inside its reasoning: its text is reasoning.
            assert response.output[0].type == "reasoning"


def test_reasoning_the_model_opens_is_a_reasoning_item(corpus_servers: Servers, name: str) -> None:
    model = corpus()[name]
    found = model.codec.syntax.reasoning
    if found is None:
        pytest.skip("the template shows no reasoning")
    if model.codec.generation_opens_reasoning({}):
        pytest.skip("the generation prompt opens the reasoning (test_reasoning_efforts_are_mapped)")
    if found.open not in model.tokens:
        pytest.skip(f"the opening {found.open!r} is several tokens; the parser tests split it")
    # The tiny model writes the opening marker first because nothing else is likely.
    bias = {str(model.tokens.index(found.open)): 100}
    response = corpus_servers.client(name).responses.create(
        model=name, input="Hi", max_output_tokens=12, extra_body={**SEEDED, "logit_bias": bias}
    )
    assert response.output and response.output[0].type == "reasoning"

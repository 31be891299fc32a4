"""Checks every remote engine kind must pass, the same for llama-server and vLLM.

Each takes an ``openai`` client of a superfluid server over the remote, and the
served model id; the remote's own tests call them with their setup.
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import openai

CITY = {"type": "object", "properties": {"city": {"enum": ["Paris", "Oslo"]}}, "required": ["city"]}
WEATHER = {"type": "function", "name": "get_weather", "parameters": CITY}
PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 12}, "age": {"type": "integer"}},
    "required": ["name", "age"],
    "additionalProperties": False,
}


def stream_adds_up_to_the_stored_response(client: openai.OpenAI, model: str) -> None:
    """A streamed response's events end in its status, and it is stored as streamed."""
    with client.responses.stream(
        model=model, input="stream", max_output_tokens=40, extra_body={"seed": 11}
    ) as stream:
        types = [e.type for e in stream]
        final = stream.get_final_response()
    assert types[:2] == ["response.created", "response.in_progress"]
    assert types[-1] == f"response.{final.status}"
    assert final.status in ("completed", "incomplete")
    stored = client.responses.retrieve(final.id)
    assert stored.output_text == final.output_text and stored.usage == final.usage


def forced_tool_call(client: openai.OpenAI, model: str) -> None:
    """``tool_choice: required`` gives exactly one call, its arguments valid."""
    r = client.responses.create(
        model=model,
        input="weather?",
        tools=[WEATHER],  # type: ignore[list-item]
        tool_choice="required",
        max_output_tokens=200,
        reasoning={"effort": "none"},
        extra_body={"seed": 5},
    )
    calls = [o for o in r.output if o.type == "function_call"]
    assert r.status == "completed" and len(calls) == 1 and calls[0].name == "get_weather"
    jsonschema.validate(json.loads(calls[0].arguments), CITY)


def json_schema_output(client: openai.OpenAI, model: str, **extra: Any) -> None:
    """A strict ``json_schema`` format gives text valid against the schema."""
    r = client.responses.create(
        model=model,
        input="person",
        max_output_tokens=200,
        extra_body={"seed": 4},
        text={"format": {"type": "json_schema", "name": "p", "schema": PERSON, "strict": True}},
        **extra,
    )
    assert r.status == "completed"
    jsonschema.validate(json.loads(r.output_text), PERSON)

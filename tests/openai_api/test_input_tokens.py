"""``POST /v1/responses/input_tokens`` through the openai SDK: validated and counted as create."""

from __future__ import annotations

import httpx
import openai
import pytest
from openai.types.responses.input_token_count_response import InputTokenCountResponse
from support.no_eos import RUN_TO_CAP

CHATML = "superfluid/tiny-chatml"
QWEN = "superfluid/tiny-qwen3"
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}
REQUESTS = [
    {"model": CHATML, "input": "Hello"},
    {"model": QWEN, "input": "Hello", "instructions": "Be terse.", "tools": [WEATHER]},
    {
        "model": QWEN,
        "input": [
            {"role": "user", "content": [{"type": "input_text", "text": "a"}]},
            {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
        ],
        "tools": [WEATHER],
        "reasoning": {"effort": "none"},
    },
]


def created_input_tokens(client: openai.OpenAI, request: dict) -> tuple[str, int]:
    made = client.responses.create(**request, max_output_tokens=2, extra_body=RUN_TO_CAP)
    assert made.usage is not None
    return made.id, made.usage.input_tokens


@pytest.mark.parametrize("request_body", REQUESTS)
def test_the_count_is_the_created_responses_input_tokens(openai_client, request_body):
    counted = openai_client.responses.input_tokens.count(**request_body)
    assert isinstance(counted, InputTokenCountResponse)
    assert counted.object == "response.input_tokens"
    assert counted.input_tokens == created_input_tokens(openai_client, request_body)[1]
    assert counted.model_extra == {"context_window": 2048}  # the tests' --ctx-size


def test_previous_response_id_is_honoured(openai_client):
    first, _ = created_input_tokens(openai_client, {"model": CHATML, "input": "My name is Ada."})
    follow = {"model": CHATML, "input": "What is my name?", "previous_response_id": first}
    counted = openai_client.responses.input_tokens.count(**follow)
    alone = openai_client.responses.input_tokens.count(model=CHATML, input="What is my name?")
    assert counted.input_tokens > alone.input_tokens
    assert counted.input_tokens == created_input_tokens(openai_client, follow)[1]


@pytest.mark.parametrize(
    ("body", "status", "param", "code"),
    [
        ({"model": CHATML}, 400, "input", None),
        ({"input": "x"}, 400, "model", None),
        ({"model": CHATML, "input": [{"type": "nope"}]}, 400, "input[0].type", None),
        (
            {"model": CHATML, "input": "x", "previous_response_id": "resp_nope"},
            400,
            "previous_response_id",
            "previous_response_not_found",
        ),
        ({"model": "nope", "input": "x"}, 400, "model", "model_not_found"),
        (
            {"model": CHATML, "input": "x", "tools": [{"type": "web_search"}]},
            400,
            "tools[0].type",
            "unsupported_tool",
        ),
    ],
)
def test_create_validation_and_errors(standalone, body, status, param, code):
    r = httpx.post(standalone.base_url + "/responses/input_tokens", json=body, timeout=30)
    create = httpx.post(standalone.base_url + "/responses", json=body, timeout=30)
    assert (r.status_code, r.json()) == (create.status_code, create.json())
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert err["param"] == param and (code is None or err["code"] == code), err


def test_a_prompt_past_the_window_is_400(standalone):
    body = {"model": CHATML, "input": "word " * 5000}
    r = httpx.post(standalone.base_url + "/responses/input_tokens", json=body, timeout=30)
    assert r.status_code == 400 and r.json()["error"]["code"] == "context_length_exceeded"


def test_nothing_is_stored(standalone):
    before = httpx.get(standalone.base_url + "/responses", params={"limit": 100}).json()
    body = {"model": CHATML, "input": "count me", "store": True}
    assert httpx.post(standalone.base_url + "/responses/input_tokens", json=body).status_code == 200
    after = httpx.get(standalone.base_url + "/responses", params={"limit": 100}).json()
    assert after["data"][:1] == before["data"][:1]

"""Chat completions and models through the official openai SDK, on the standalone server."""

from __future__ import annotations

import asyncio
import json

import jsonschema
import openai
import pytest
from support.no_eos import NO_EOS_WIRE

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather of a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"enum": ["Paris", "Oslo", "Lima"]},
                "unit": {"enum": ["c", "f"]},
            },
            "required": ["city", "unit"],
            "additionalProperties": False,
        },
    },
}
SCHEMA = {
    "type": "object",
    "properties": {"name": {"enum": ["ada", "bob"]}, "age": {"type": "integer"}},
    "required": ["name", "age"],
    "additionalProperties": False,
}


def test_models_lists_the_tiny_models(openai_client):
    ids = [m.id for m in openai_client.models.list()]
    assert ids == ["superfluid/tiny-chatml", "superfluid/tiny-qwen3"]
    assert openai_client.models.retrieve("superfluid/tiny-qwen3").id == "superfluid/tiny-qwen3"


def test_completion_counts_tokens(openai_client):
    out = openai_client.chat.completions.create(
        model="superfluid/tiny-chatml",
        messages=[{"role": "user", "content": "hi"}],
        max_tokens=7,
        seed=1,
        temperature=0,
        logit_bias=NO_EOS_WIRE,
    )
    choice = out.choices[0]
    assert out.object == "chat.completion"
    assert choice.message.role == "assistant"
    assert choice.finish_reason == "length" and out.usage.completion_tokens == 7
    assert out.usage.total_tokens == out.usage.prompt_tokens + out.usage.completion_tokens
    assert out.usage.prompt_tokens_details.cached_tokens <= out.usage.prompt_tokens


def test_same_seed_same_output(openai_client):
    def run(seed):
        return (
            openai_client.chat.completions.create(
                model="superfluid/tiny-chatml",
                messages=[{"role": "user", "content": "tell"}],
                max_tokens=12,
                seed=seed,
                temperature=1.0,
            )
            .choices[0]
            .message.content
        )

    assert run(11) == run(11)
    assert {run(s) for s in (1, 2, 3)} != {run(11)} or run(1) != run(2)


def test_stream_chunks_end_with_done(standalone):
    import httpx

    body = {
        "model": "superfluid/tiny-chatml",
        "messages": [{"role": "user", "content": "x"}],
        "max_tokens": 6,
        "stream": True,
        "seed": 2,
        "logit_bias": NO_EOS_WIRE,
        "stream_options": {"include_usage": True},
    }
    with httpx.stream(
        "POST", standalone.base_url + "/chat/completions", json=body, timeout=60
    ) as r:
        lines = [ln for ln in r.iter_lines() if ln.startswith("data: ")]
    assert lines[-1] == "data: [DONE]"
    chunks = [json.loads(ln[6:]) for ln in lines[:-1]]
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 6
    finishes = [c["choices"][0]["finish_reason"] for c in chunks[:-1]]
    assert finishes[-1] == "length" and set(finishes[:-1]) == {None}


def test_sdk_stream_matches_non_stream(openai_client):
    kwargs = dict(
        model="superfluid/tiny-chatml",
        messages=[{"role": "user", "content": "s"}],
        max_tokens=10,
        seed=5,
        temperature=0.7,
    )
    whole = openai_client.chat.completions.create(**kwargs).choices[0].message.content
    parts = [
        c.choices[0].delta.content or ""
        for c in openai_client.chat.completions.create(stream=True, **kwargs)
        if c.choices
    ]
    assert "".join(parts) == whole


@pytest.mark.parametrize(
    "choice", ["required", {"type": "function", "function": {"name": "get_weather"}}]
)
def test_forced_tool_call_matches_schema(openai_client, choice):
    out = openai_client.chat.completions.create(
        model="superfluid/tiny-qwen3",
        messages=[{"role": "user", "content": "weather?"}],
        tools=[WEATHER],
        tool_choice=choice,
        max_tokens=400,
        seed=4,
        reasoning_effort="none",
    )
    msg = out.choices[0].message
    assert out.choices[0].finish_reason == "tool_calls"
    assert len(msg.tool_calls) == 1
    call = msg.tool_calls[0]
    assert call.function.name == "get_weather" and call.id
    jsonschema.validate(json.loads(call.function.arguments), WEATHER["function"]["parameters"])


def test_json_schema_output_validates(openai_client):
    out = openai_client.chat.completions.create(
        model="superfluid/tiny-chatml",
        messages=[{"role": "user", "content": "who"}],
        response_format={
            "type": "json_schema",
            "json_schema": {"name": "person", "schema": SCHEMA, "strict": True},
        },
        max_tokens=200,
        seed=8,
    )
    assert out.choices[0].finish_reason == "stop"
    jsonschema.validate(json.loads(out.choices[0].message.content), SCHEMA)


@pytest.mark.parametrize(
    "pattern", [r"^\d{3}-\d{4}$", r"^v\d{1,3}\.\d{1,3}$", r"^[\w.]{1,12}@example\.com$"]
)
def test_a_pattern_with_escapes_is_enforced(openai_client, pattern):
    schema = {
        "type": "object",
        "properties": {"v": {"type": "string", "pattern": pattern, "maxLength": 40}},
        "required": ["v"],
        "additionalProperties": False,
    }
    out = openai_client.chat.completions.create(
        model="superfluid/tiny-chatml",
        messages=[{"role": "user", "content": "value"}],
        response_format={"type": "json_schema", "json_schema": {"name": "v", "schema": schema}},
        max_tokens=120,
        seed=4,
    )
    assert out.choices[0].finish_reason == "stop"
    jsonschema.validate(json.loads(out.choices[0].message.content), schema)  # the pattern too


def test_json_object_output_parses(openai_client):
    out = openai_client.chat.completions.create(
        model="superfluid/tiny-chatml",
        messages=[{"role": "user", "content": "obj"}],
        response_format={"type": "json_object"},
        max_tokens=300,
        seed=9,
    )
    assert out.choices[0].finish_reason == "stop"  # seed 9 closes the object within the cap
    assert isinstance(json.loads(out.choices[0].message.content), dict)


def test_eight_concurrent_streams_all_complete(standalone):
    async def one(client, seed):
        stream = await client.chat.completions.create(
            model="superfluid/tiny-chatml",
            messages=[{"role": "user", "content": "c"}],
            max_tokens=16,
            seed=seed,
            stream=True,
            temperature=0.9,
        )
        text, finish = "", None
        async for chunk in stream:
            if chunk.choices:
                text += chunk.choices[0].delta.content or ""
                finish = chunk.choices[0].finish_reason or finish
        return text, finish

    async def main():
        client = openai.AsyncOpenAI(base_url=standalone.base_url, api_key="x", max_retries=0)
        together = await asyncio.gather(*(one(client, s) for s in range(8)))
        alone = [await one(client, s) for s in range(8)]
        return together, alone

    together, alone = asyncio.run(main())
    # Seeds 0-7: half end on their own while the others run to the cap beside them.
    finishes = ["stop", "length", "length", "stop", "stop", "length", "stop", "length"]
    assert [finish for _, finish in together] == finishes
    assert together == alone  # batching gives each stream its own, correct answer


BAD = [
    ({"messages": [{"role": "user", "content": "x"}]}, "model", None),
    ({"model": "nope", "messages": [{"role": "user", "content": "x"}]}, "model", "model_not_found"),
    ({"model": "superfluid/tiny-chatml", "messages": []}, "messages", None),
    ({"model": "superfluid/tiny-chatml", "messages": "hi"}, "messages", None),
    (
        {"model": "superfluid/tiny-chatml", "messages": [{"role": "wizard", "content": "x"}]},
        "messages[0].role",
        None,
    ),
    (
        {
            "model": "superfluid/tiny-chatml",
            "messages": [{"role": "user", "content": "x"}],
            "temperature": 5,
        },
        "temperature",
        None,
    ),
    (
        {
            "model": "superfluid/tiny-chatml",
            "messages": [{"role": "user", "content": "x"}],
            "max_tokens": 0,
        },
        "max_tokens",
        None,
    ),
    (
        {
            "model": "superfluid/tiny-chatml",
            "messages": [{"role": "user", "content": "x"}],
            "top_p": "high",
        },
        "top_p",
        None,
    ),
    (
        {
            "model": "superfluid/tiny-chatml",
            "messages": [{"role": "user", "content": "x"}],
            "tool_choice": {"type": "function", "function": {"name": "ghost"}},
        },
        "tool_choice",
        None,
    ),
    (
        {
            "model": "superfluid/tiny-chatml",
            "messages": [{"role": "user", "content": "x"}],
            "response_format": {"type": "json_schema"},
        },
        "response_format.json_schema",
        None,
    ),
    (
        {
            "model": "superfluid/tiny-chatml",
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}}
                    ],
                }
            ],
        },
        "messages[0].content[0]",
        "unsupported_input",
    ),
    (
        {"model": "superfluid/tiny-chatml", "messages": [{"role": "user", "content": "x" * 20000}]},
        "input",
        "context_length_exceeded",
    ),
]


@pytest.mark.parametrize(("body", "param", "code"), BAD)
def test_bad_input_is_a_400_naming_the_field(standalone, body, param, code):
    import httpx

    r = httpx.post(standalone.base_url + "/chat/completions", json=body, timeout=30)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["param"] == param
    assert err["message"] and err["type"] == "invalid_request_error"
    if code:
        assert err["code"] == code


@pytest.mark.parametrize("raw", [b"{not json", b"[1, 2]", b"\xff\xfe"])
def test_malformed_bodies_are_400(standalone, raw):
    import httpx

    r = httpx.post(standalone.base_url + "/chat/completions", content=raw, timeout=30)
    assert r.status_code == 400
    assert "error" in r.json()


def test_oversize_body_is_413(sf_start_standalone):
    import httpx

    server = sf_start_standalone("--Superfluid.max_request_bytes=1000")
    r = httpx.post(server.base_url + "/chat/completions", content=b"x" * 5000, timeout=30)
    assert r.status_code == 413
    assert r.json()["error"]["code"] == "request_too_large"


def test_unknown_model_via_sdk_is_bad_request(openai_client):
    with pytest.raises(openai.BadRequestError) as info:
        openai_client.chat.completions.create(
            model="ghost", messages=[{"role": "user", "content": "x"}]
        )
    assert info.value.code == "model_not_found"


def test_stop_string_cuts_the_text(openai_client):
    kwargs = dict(
        model="superfluid/tiny-chatml",
        messages=[{"role": "user", "content": "s"}],
        max_tokens=40,
        seed=12,
        temperature=1.0,
    )
    whole = openai_client.chat.completions.create(**kwargs).choices[0].message.content
    assert len(whole) > 6
    stop = whole[4:6]
    cut = openai_client.chat.completions.create(stop=[stop], **kwargs)
    assert cut.choices[0].message.content == whole[: whole.index(stop)]
    assert cut.choices[0].finish_reason == "stop"
    streamed = "".join(
        c.choices[0].delta.content or ""
        for c in openai_client.chat.completions.create(stop=stop, stream=True, **kwargs)
        if c.choices
    )
    assert streamed == whole[: whole.index(stop)]

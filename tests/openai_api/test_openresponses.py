"""OpenResponses conformance: bodies and events validate against the published schema,
and the intent of its 11 compliance scenarios holds (built-in tools are refused as
spec/openai-responses.txt says; an input_file PDF is read, so a truncated one is a 400)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.media_samples import data_url, png
from support.openresponses_schema import validate_event, validate_response

from jupyter_superfluid.pytest_plugin import StandaloneServer, start_standalone

CHATML = "superfluid/tiny-chatml"
QWEN = "superfluid/tiny-qwen3"
VISION = "superfluid/tiny-vision"
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Get the current weather for a location",
    "parameters": {
        "type": "object",
        "properties": {"location": {"type": "string", "description": "The city"}},
        "required": ["location"],
    },
}


@pytest.fixture(scope="module")
def server(sf_model_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A server with a text, a reasoning and a vision model; answers capped at 120 tokens."""
    srv: StandaloneServer = start_standalone(
        sf_model_cache,
        tmp_path_factory.mktemp("openresponses"),
        "--max-tokens=120",
        models=(CHATML, QWEN, VISION),
    )
    yield srv.base_url
    srv.stop()


def create(url: str, body: dict[str, Any]) -> dict[str, Any]:
    """POST a response; its body, validated, and the stored copy, validated too."""
    r = httpx.post(url + "/responses", json=body, timeout=120)
    assert r.status_code == 200, r.text
    made = r.json()
    validate_response(made)
    stored = httpx.get(f"{url}/responses/{made['id']}", timeout=30)
    assert stored.status_code == 200
    validate_response(stored.json())
    assert stored.json() == made
    return made


def completed(url: str, body: dict[str, Any]) -> dict[str, Any]:
    """A response that ended on its own (a tiny model does, for some seed)."""
    for seed in range(30):
        made = create(url, {**body, "seed": seed})
        if made["status"] == "completed":
            return made
    raise AssertionError("no seed gave a completed response")


def stream(url: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    """The events of a streamed response, each validated."""
    with httpx.stream("POST", url + "/responses", json={**body, "stream": True}, timeout=120) as r:
        assert r.status_code == 200
        datas = [line[6:] for line in r.iter_lines() if line.startswith("data: ")]
    assert datas[-1] == "[DONE]"  # OpenResponses' terminal line
    events = [json.loads(d) for d in datas[:-1]]
    for event in events:
        validate_event(event)
    return events


def message(role: str, content: str) -> dict[str, Any]:
    return {"type": "message", "role": role, "content": content}


def test_basic_response(server):
    made = completed(server, {"model": CHATML, "input": [message("user", "Say hello.")]})
    assert made["output"] and made["completed_at"] >= made["created_at"]


def test_streaming_response_every_event_validates(server):
    # Seed 3: the answers end on their own; the forced call's free-text argument runs on
    # to the model's default cap.
    for model, extra, final in [
        (CHATML, {}, "response.completed"),
        (QWEN, {}, "response.completed"),
        (QWEN, {"tools": [WEATHER], "tool_choice": "required"}, "response.incomplete"),
    ]:
        events = stream(server, {"model": model, "input": "Count to 5.", "seed": 3, **extra})
        assert [e["sequence_number"] for e in events] == list(range(len(events)))
        assert events[-1]["type"] == final
        validate_response(events[-1]["response"])
        for e in events[:2]:
            validate_response(e["response"])
        kinds = {e["type"] for e in events}
        if extra:
            assert "response.function_call_arguments.done" in kinds
        elif model == QWEN:
            assert "response.reasoning_text.delta" in kinds


def test_system_prompt(server):
    body = {"model": CHATML, "input": [message("system", "Be a pirate."), message("user", "Hi.")]}
    assert completed(server, body)["output"]


def test_tool_calling(server):
    made = create(
        server,
        {"model": QWEN, "input": "Weather in SF?", "tools": [WEATHER], "tool_choice": "required"},
    )
    calls = [o for o in made["output"] if o["type"] == "function_call"]
    assert (calls and made["tools"][0]["strict"] is None) or made["tools"][0]["strict"] in (
        True,
        False,
    )


def test_function_call_roundtrip(server):
    first = create(
        server,
        {
            "model": QWEN,
            "input": "Use the weather tool for San Francisco.",
            "tools": [WEATHER],
            "tool_choice": {"type": "function", "name": "get_weather"},
            "seed": 0,
        },
    )
    call = next(o for o in first["output"] if o["type"] == "function_call")
    second = completed(
        server,
        {
            "model": QWEN,
            "previous_response_id": first["id"],
            "input": [
                {"type": "function_call_output", "call_id": call["call_id"], "output": "64 F"}
            ],
            "reasoning": {"effort": "none"},
        },
    )
    assert second["previous_response_id"] == first["id"]


def test_image_input(server):
    content = [
        {"type": "input_text", "text": "What do you see?"},
        {"type": "input_image", "image_url": data_url(png(8, 8, seed=5))},
    ]
    assert completed(server, {"model": VISION, "input": [message("user", content)]})["output"]


def test_multi_turn(server):
    items = [
        message("user", "My name is Alice."),
        message("assistant", "Hello Alice!"),
        message("user", "What is my name?"),
    ]
    assert completed(server, {"model": CHATML, "input": items})["output"]


def test_previous_response_id(server):
    first = create(server, {"model": CHATML, "input": "Remember: papaya. Reply OK."})
    second = completed(
        server, {"model": CHATML, "previous_response_id": first["id"], "input": "The word?"}
    )
    assert second["previous_response_id"] == first["id"]


@pytest.mark.parametrize(
    ("extra", "code", "param"),
    [
        (
            {
                "input": [
                    {
                        "type": "message",
                        "role": "user",
                        "content": [
                            {"type": "input_text", "text": "Title?"},
                            {
                                "type": "input_file",
                                "filename": "f.pdf",
                                "file_data": "data:application/pdf;base64,JVBERi0=",
                            },
                        ],
                    }
                ]
            },
            "invalid_file",  # "%PDF-" and nothing more
            "input[0].content[1]",
        ),
        (
            {
                "tools": [{"type": "file_search", "vector_store_ids": ["vs_1"]}],
                "tool_choice": {"type": "file_search"},
                "include": ["file_search_call.results"],
            },
            "unsupported_tool",
            "tools[0].type",
        ),
        (
            {
                "tools": [{"type": "web_search", "external_web_access": False}],
                "tool_choice": {"type": "web_search"},
            },
            "unsupported_tool",
            "tools[0].type",
        ),
    ],
    ids=["file-input", "file-search", "offline-web-search"],
)
def test_built_in_tools_and_files_are_refused(server, extra, code, param):
    body = {"model": CHATML, "input": "Find it.", **extra}
    r = httpx.post(server + "/responses", json=body, timeout=30)
    assert r.status_code == 400, r.text
    assert (r.json()["error"]["code"], r.json()["error"]["param"]) == (code, param)


def test_every_echoed_parameter_validates(server):
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    made = create(
        server,
        {
            "model": QWEN,
            "input": "x",
            "instructions": "Be terse.",
            "max_output_tokens": 3,
            "temperature": 0.4,
            "top_p": 0.7,
            "presence_penalty": 0.5,
            "frequency_penalty": -0.5,
            "top_logprobs": 2,
            "max_tool_calls": 4,
            "service_tier": "auto",
            "safety_identifier": "s1",
            "prompt_cache_key": "k1",
            "user": "u1",
            "metadata": {"k": "v"},
            "reasoning": {"effort": "low"},
            "tools": [WEATHER],
            "text": {"format": {"type": "json_schema", "name": "o", "schema": schema}},
        },
    )
    assert made["status"] == "incomplete" and made["incomplete_details"] == {
        "reason": "max_output_tokens"
    }
    assert (made["temperature"], made["top_p"]) == (0.4, 0.7)
    assert (made["presence_penalty"], made["frequency_penalty"], made["top_logprobs"]) == (
        0.5,
        -0.5,
        2,
    )
    assert (made["max_tool_calls"], made["safety_identifier"], made["prompt_cache_key"]) == (
        4,
        "s1",
        "k1",
    )
    fmt = made["text"]["format"]
    assert (fmt["schema"], fmt["description"], fmt["strict"]) == (schema, None, False)
    assert made["tools"][0]["strict"] is False and made["completed_at"] is None
    defaults = create(server, {"model": CHATML, "input": "x", "max_output_tokens": 2})
    assert isinstance(defaults["temperature"], float) and isinstance(defaults["top_p"], float)


def test_lmsp_stored_response_validates_as_openresponses(server):
    lmsp = server.removesuffix("/v1") + "/lmsp/v1"
    body = {
        "model": CHATML,
        "store": True,
        "max_output_tokens": 3,
        "input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "x"}]}
        ],
    }
    made = httpx.post(lmsp + "/responses", json=body, timeout=60).json()
    validate_response(httpx.get(f"{server}/responses/{made['id']}", timeout=30).json())

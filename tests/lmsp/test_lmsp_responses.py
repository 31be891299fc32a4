"""LMSP responses (6.1, 6.2, 6.5) and streaming (6.3) on the shared standalone server."""

from __future__ import annotations

import json
import re

import httpx
import pytest
from support.no_eos import NO_EOS_WIRE, RUN_TO_CAP

from .helpers import (
    CHATML,
    FINAL,
    QWEN,
    assert_problem,
    events_of,
    request,
    user,
)

RESPONSE_KEYS = {
    "id",
    "object",
    "created_at",
    "status",
    "model",
    "output",
    "usage",
    "error",
    "incomplete_details",
}
CITY = {
    "type": "object",
    "properties": {"city": {"enum": ["Paris", "Oslo"]}},
    "required": ["city"],
    "additionalProperties": False,
}
WEATHER = {"type": "function", "name": "get_weather", "description": "Weather.", "parameters": CITY}


def post(url: str, body: dict, **kw) -> httpx.Response:
    return httpx.post(f"{url}/responses", json=body, timeout=60, **kw)


def completed(url: str, **fields) -> dict:
    """A response that ended on its own (the tiny models stop after a few dozen tokens)."""
    for seed in range(40):
        r = post(url, request(max_output_tokens=120, seed=seed, **fields))
        assert r.status_code == 200, r.text
        if r.json()["status"] == "completed":
            return r.json()
    raise AssertionError("no seed gave a completed response")


def assert_usage(usage: dict, cap: int | None = None) -> None:
    assert set(usage) == {"input_tokens", "output_tokens", "total_tokens"}
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
    assert usage["input_tokens"] > 0
    if cap is not None:
        assert usage["output_tokens"] <= cap


def test_synchronous_response_has_exactly_the_spec_shape(url):
    r = post(url, request(max_output_tokens=12, temperature=0.5, **RUN_TO_CAP))
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("application/json")
    assert r.headers["lmsp-version"] == "1.0"
    body = r.json()
    assert set(body) == RESPONSE_KEYS
    assert re.fullmatch(r"resp_[0-9a-f]{32}", body["id"])
    assert body["object"] == "response" and body["model"] == CHATML
    assert isinstance(body["created_at"], int) and body["error"] is None
    assert_usage(body["usage"], cap=12)
    assert body["status"] == "incomplete"
    assert body["incomplete_details"] == {"reason": "max_output_tokens"}
    assert body["usage"]["output_tokens"] == 12
    assert len(body["output"]) == 1
    for item in body["output"]:
        assert set(item) == {"id", "type", "role", "content"} and item["type"] == "message"
        assert item["role"] == "assistant" and item["id"].startswith("msg_")
        assert [set(p) for p in item["content"]] == [{"type", "text"}]
        assert item["content"][0]["type"] == "output_text"


def test_a_request_cut_by_the_cap_is_incomplete(url):
    body = request(max_output_tokens=2, seed=7, logit_bias=NO_EOS_WIRE)
    r = post(url, body).json()
    assert r["status"] == "incomplete" and r["incomplete_details"] == {
        "reason": "max_output_tokens"
    }
    assert r["usage"]["output_tokens"] == 2


def test_store_defaults_to_false(url):
    unstored = post(url, request(max_output_tokens=4)).json()
    r = httpx.get(f"{url}/responses/{unstored['id']}")
    assert_problem(r, 404, "response_not_found", "response_id")
    r = post(url, {**request(), "previous_response_id": unstored["id"]})
    assert_problem(r, 400, "response_not_found", "previous_response_id")
    stored = post(url, request(max_output_tokens=4, store=True)).json()
    assert httpx.get(f"{url}/responses/{stored['id']}").json() == stored


def test_stream_numbers_events_from_one_and_closes_after_the_final_one(url):
    body = request(max_output_tokens=40, seed=3, stream=True)
    with httpx.stream("POST", f"{url}/responses", json=body, timeout=60) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        assert r.headers["lmsp-version"] == "1.0"
        events = events_of(r.read().decode())  # read() returns: the server closed the stream
    assert [e.id for e in events] == list(range(1, len(events) + 1))
    assert events[-1].name in FINAL and not any(e.name in FINAL for e in events[:-1])
    rid = events[0].data["response_id"]
    assert events[0].name == "response.created"
    assert events[0].data == {"response_id": rid, "status": "in_progress"}
    added = [e for e in events if e.name == "response.output_item.added"]
    done = [e for e in events if e.name == "response.output_item.done"]
    deltas = [e for e in events if e.name == "response.output_text.delta"]
    assert len(added) == len(done) == 1 and deltas
    item_id = added[0].data["item"]["id"]
    assert added[0].data == {
        "response_id": rid,
        "output_index": 0,
        "item": {"id": item_id, "type": "message", "role": "assistant", "content": []},
    }
    for delta in deltas:
        assert set(delta.data) == {"response_id", "item_id", "delta"}
        assert delta.data["response_id"] == rid and delta.data["item_id"] == item_id
    text = "".join(d.data["delta"] for d in deltas)
    assert done[0].data == {
        "response_id": rid,
        "output_index": 0,
        "item": {
            "id": item_id,
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": text}],
        },
    }
    final = events[-1]
    usage = final.data["usage"]
    assert_usage(usage, cap=40)
    if final.name == "response.completed":
        assert final.data == {"response_id": rid, "status": "completed", "usage": usage}
    else:
        assert final.data == {
            "response_id": rid,
            "status": "incomplete",
            "incomplete_details": {"reason": "max_output_tokens"},
            "usage": usage,
        }
    # The same request unstreamed produces the same output (one chat path).
    sync = post(url, {**body, "stream": False}).json()
    assert sync["output"][0]["content"][0]["text"] == text and sync["usage"] == usage


def test_reasoning_is_an_item_with_a_summary(url):
    body = request(QWEN, max_output_tokens=60, seed=2, stream=True, reasoning_effort="high")
    events = events_of(post(url, body).text)
    rs = next(e for e in events if e.name == "response.output_item.done").data["item"]
    assert set(rs) == {"id", "type", "summary"} and rs["type"] == "reasoning"
    assert rs["id"].startswith("rs_") and [p["type"] for p in rs["summary"]] == ["summary_text"]
    added = next(e for e in events if e.name == "response.output_item.added").data["item"]
    assert added == {"id": rs["id"], "type": "reasoning", "summary": []}
    deltas = [e for e in events if e.data.get("item_id") == rs["id"]]
    assert {e.name for e in deltas} <= {"response.reasoning_summary_text.delta"}
    assert "".join(e.data["delta"] for e in deltas) == rs["summary"][0]["text"]


def test_tool_call_arrives_complete_in_output_item_done(url):
    body = request(QWEN, max_output_tokens=200, seed=1, stream=True)
    body.update(tools=[WEATHER], tool_choice="required")
    events = events_of(post(url, body).text)
    assert events[-1].name == "response.completed"
    calls = [
        e.data["item"]
        for e in events
        if e.name == "response.output_item.done" and e.data["item"]["type"] == "function_call"
    ]
    assert len(calls) == 1
    call = calls[0]
    assert set(call) == {"id", "type", "call_id", "name", "arguments"}
    assert call["name"] == "get_weather" and call["call_id"]
    assert json.loads(call["arguments"])["city"] in ("Paris", "Oslo")
    assert not [e for e in events if e.data.get("item_id") == call["id"]]  # no argument deltas
    # The client runs the tool and sends the full context back.
    items = [user("Weather in Paris?"), call]
    items.append({"type": "function_call_output", "call_id": call["call_id"], "output": "sunny"})
    more = request(QWEN, input=items, tools=[WEATHER], max_output_tokens=5, **RUN_TO_CAP)
    r = post(url, more)
    assert r.status_code == 200 and r.json()["status"] == "incomplete"


def test_named_tool_choice_in_a_synchronous_response(url):
    body = request(QWEN, max_output_tokens=200, seed=4, reasoning_effort="none")
    body.update(tools=[WEATHER], tool_choice={"type": "function", "name": "get_weather"})
    out = post(url, body).json()["output"]
    assert [i["type"] for i in out] == ["function_call"]
    assert out[0]["name"] == "get_weather" and json.loads(out[0]["arguments"])


def test_json_schema_response_format(url):
    fmt = {"type": "json_schema", "json_schema": {"name": "city", "schema": CITY}}
    r = post(url, request(max_output_tokens=100, seed=5, response_format=fmt)).json()
    assert r["status"] == "completed"
    assert json.loads(r["output"][0]["content"][0]["text"])["city"] in ("Paris", "Oslo")


def test_a_template_without_tools_calls_them_in_the_generic_format(url):
    # tiny-chatml's ChatML shows no tools: they are described in the system text, and a
    # grammar forces the generic JSON call, read back as a function_call item.
    body = request(CHATML, max_output_tokens=200, seed=4)
    body.update(tools=[WEATHER], tool_choice="required")
    out = post(url, body).json()["output"]
    assert [i["type"] for i in out] == ["function_call"]
    assert json.loads(out[0]["arguments"])["city"] in ("Paris", "Oslo")


@pytest.mark.parametrize(
    ("body", "param"),
    [
        (request(reasoning_effort="high"), "extensions.superfluid.reasoning_effort"),
        (
            {"model": CHATML, "input": [{"role": "user", "content": [{"type": "input_image"}]}]},
            "input[0].content[0].type",
        ),
    ],
)
def test_capabilities_the_model_lacks_are_refused(url, body, param):
    # tiny-chatml's template has no thinking switch, and the model takes no images.
    assert_problem(post(url, body), 400, "unsupported_capability", param)


@pytest.mark.parametrize("stream", [False, True])
def test_context_overflow(url, stream):
    body = request(text="lorem ipsum " * 1500, stream=stream)
    assert_problem(post(url, body), 400, "context_length_exceeded", "input")


def test_extensions_unknown_ignored_critical_refused(url):
    body = request(max_output_tokens=2)
    body["extensions"] = {"acme.trace": {"level": 3}, "superfluid": {"seed": 1, "critical": True}}
    assert post(url, body).status_code == 200
    body["extensions"]["acme.trace"]["critical"] = True
    assert_problem(post(url, body), 400, "unsupported_extension", "extensions.acme.trace")
    body["extensions"] = {"superfluid": {"sed": 1}}
    assert_problem(post(url, body), 400, "invalid_request", "extensions.superfluid.sed")


def test_version_negotiation(url):
    body = request(max_output_tokens=2)
    assert post(url, body, headers={"LMSP-Version": "1.0"}).status_code == 200
    for path in ("", "/models"):
        r = httpx.get(url + path)
        assert r.status_code == 200 and r.headers["lmsp-version"] == "1.0"
        r = httpx.get(url + path, headers={"LMSP-Version": "2.0"})
        assert_problem(r, 400, "unsupported_version", "LMSP-Version")
    assert_problem(
        post(url, body, headers={"LMSP-Version": "0.9"}), 400, "unsupported_version", "LMSP-Version"
    )


def test_conversation_continues_across_protocols(standalone, url):
    import openai

    client = openai.OpenAI(base_url=standalone.base_url, api_key="unused", max_retries=0)
    first = None
    for seed in range(40):  # a turn that ended on its own is forked warm
        first = client.responses.create(
            model=CHATML, input="My name is Ada.", max_output_tokens=120, extra_body={"seed": seed}
        )
        if first.status == "completed":
            break
    assert first is not None and first.status == "completed"
    # LMSP continues the OpenAI response from the one store, warm.
    second = None
    for seed in range(40):
        r = post(
            url, {**request(text="Name?", seed=seed, store=True), "previous_response_id": first.id}
        )
        second = r.json()
        if second["status"] == "completed":
            break
    assert second is not None and second["status"] == "completed"
    assert int(r.headers["x-superfluid-warm"]) > 0
    assert second["usage"]["input_tokens"] > first.usage.total_tokens
    # ... and the OpenAI API continues the LMSP response.
    third = client.responses.create(
        previous_response_id=second["id"], input="Again?", max_output_tokens=4
    )
    assert third.previous_response_id == second["id"]
    assert third.usage.input_tokens_details.cached_tokens > 0
    assert third.usage.input_tokens > second["usage"]["total_tokens"]
    # LMSP shows a response the OpenAI API stored in LMSP's shape.
    shown = httpx.get(f"{url}/responses/{first.id}").json()
    assert set(shown) == RESPONSE_KEYS and shown["status"] == "completed"
    assert shown["output"][0]["content"] == [{"type": "output_text", "text": first.output_text}]
    assert shown["usage"]["total_tokens"] == first.usage.total_tokens

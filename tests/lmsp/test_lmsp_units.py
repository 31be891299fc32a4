"""The pure parts of the LMSP layer: capability checks, the event serializer, problems."""

from __future__ import annotations

from dataclasses import replace

import pytest

from jupyter_superfluid.chat.types import (
    ItemDone,
    ItemStarted,
    OutputItem,
    TextDelta,
    Usage,
)
from jupyter_superfluid.errors import APIError, Unauthorized, UnsupportedCapability
from jupyter_superfluid.generation import wire
from jupyter_superfluid.generation.items import messages_from_items, messages_from_json
from jupyter_superfluid.generation.stored import StoredResponse
from jupyter_superfluid.lmsp import capabilities
from jupyter_superfluid.lmsp.events import LmspEncoder
from jupyter_superfluid.lmsp.problems import problem
from jupyter_superfluid.lmsp.protocol import input_items, parse_request, superfluid_extension

from .helpers import request

ALL = dict.fromkeys(capabilities.NAMES, True)


@pytest.mark.parametrize(
    ("missing", "fields", "param"),
    [
        (
            "structured_output",
            {
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": "x", "schema": {}},
                }
            },
            "response_format",
        ),
        ("conversations", {"previous_response_id": "resp_x"}, "previous_response_id"),
        ("streaming", {"stream": True}, "stream"),
        ("tools", {"tools": [{"type": "function", "name": "f"}]}, "tools"),
        ("text", {}, "input"),
    ],
)
def test_each_capability_is_checked(missing, fields, param):
    req = parse_request({**request(), **fields})
    ext = superfluid_extension(req)
    capabilities.check("m", ALL, req, ext)
    with pytest.raises(UnsupportedCapability) as info:
        capabilities.check("m", {**ALL, missing: False}, req, ext)
    assert info.value.param == param and missing in info.value.message


def test_a_task_needs_the_tasks_capability_but_not_streaming():
    req = parse_request({**request(), "stream": True})
    ext = superfluid_extension(req)
    capabilities.check("m", {**ALL, "streaming": False}, req, ext, task=True)
    with pytest.raises(UnsupportedCapability):
        capabilities.check("m", {**ALL, "tasks": False}, req, ext, task=True)


def pending(rid: str) -> StoredResponse:
    return StoredResponse(id=rid, model="m", status="in_progress", created_at=0, protocol="lmsp")


def test_a_tool_call_is_sent_complete_with_no_argument_deltas():
    enc = LmspEncoder("resp_abc")
    events = enc.opened(pending("resp_abc"))
    for neutral in [
        ItemStarted(0, "function_call", call_id="call_1", name="get_weather"),
        TextDelta(0, "function_call", '{"city": '),
        TextDelta(0, "function_call", '"Oslo"}'),
        ItemDone(0, OutputItem("function_call", '{"city": "Oslo"}', "call_1", "get_weather")),
    ]:
        events += enc.on(neutral)
    done = replace(pending("resp_abc"), status="completed", usage=Usage(5, 0, 7))
    events += enc.closed(done)
    assert [(i, name) for i, name, _ in events] == [
        (1, "response.created"),
        (2, "response.output_item.added"),
        (3, "response.output_item.done"),
        (4, "response.completed"),
    ]
    call = {
        "id": "fc_abc_0",
        "type": "function_call",
        "call_id": "call_1",
        "name": "get_weather",
        "arguments": '{"city": "Oslo"}',
    }
    assert events[2][2] == {"response_id": "resp_abc", "output_index": 0, "item": call}
    assert events[1][2]["item"] == {**call, "arguments": ""}
    assert events[3][2]["usage"] == {"input_tokens": 5, "output_tokens": 7, "total_tokens": 12}
    assert enc.events == events


def test_final_events_of_every_status():
    usage = Usage(3, 0, 2)
    base = replace(pending("resp_x"), usage=usage)
    assert LmspEncoder("resp_x").closed(replace(base, status="cancelled"))[0][1:] == (
        "response.cancelled",
        {"response_id": "resp_x", "status": "cancelled"},
    )
    failed = replace(base, status="failed", error={"code": None, "message": "boom"})
    error = LmspEncoder("resp_x").closed(failed)[0][2]["error"]
    assert (error["code"], error["status"], error["detail"]) == ("generation_failed", 500, "boom")
    crashed = replace(failed, error={"code": "engine_crashed", "message": "gone"})
    error = LmspEncoder("resp_x").closed(crashed)[0][2]["error"]
    assert (error["code"], error["status"]) == ("engine_crashed", 503)
    cut = replace(base, status="incomplete", incomplete_reason="max_output_tokens")
    assert LmspEncoder("resp_x").closed(cut)[0][2] == {
        "response_id": "resp_x",
        "status": "incomplete",
        "incomplete_details": {"reason": "max_output_tokens"},
        "usage": {"input_tokens": 3, "output_tokens": 2, "total_tokens": 5},
    }


def test_an_invalid_key_is_lmsp_unauthorized():
    doc = problem(Unauthorized("no such key", code="invalid_api_key"))
    assert doc == {
        "type": "about:blank",
        "title": "Unauthorized",
        "status": 401,
        "detail": "no such key",
        "code": "unauthorized",
    }


SENT_BACK = [
    {"role": "user", "content": [{"type": "input_text", "text": "weather?"}]},
    {"id": "rs_1", "type": "reasoning", "summary": [{"type": "summary_text", "text": "ask"}]},
    {"id": "fc_1", "type": "function_call", "call_id": "c1", "name": "get", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "c1", "output": "17", "note": None},
]


def test_input_items_are_wire_items_and_stored_as_sent():
    # Parsed once: the chat path reads the validated items; the store keeps them as JSON.
    req = parse_request({"model": "m", "input": SENT_BACK})
    kinds = (
        wire.MessageItem,
        wire.ReasoningItem,
        wire.FunctionCallItem,
        wire.FunctionCallOutputItem,
    )
    assert all(isinstance(i, k) for i, k in zip(req.input, kinds, strict=True))
    stored = input_items(req)
    assert stored[0] == {"type": "message", **SENT_BACK[0]}
    assert stored[1:3] == [
        {"type": "reasoning", "summary": [{"type": "summary_text", "text": "ask"}], "id": "rs_1"},
        {"type": "function_call", "call_id": "c1", "name": "get", "arguments": "{}", "id": "fc_1"},
    ]
    assert stored[3] == {"type": "function_call_output", "call_id": "c1", "output": "17"}
    assert messages_from_items(req.input) == messages_from_json(stored)


BAD = "invalid_request"


@pytest.mark.parametrize(
    ("item", "code", "param"),
    [
        (
            {"role": "user", "content": [{"type": "input_audio"}]},
            "unsupported_capability",
            "input[0].content[0].type",
        ),
        ({"role": "user", "content": "hi"}, BAD, "input[0].content"),
        ({"role": "developer", "content": []}, BAD, "input[0].role"),
        ({"type": "function_call_output", "call_id": "c", "output": []}, BAD, "input[0].output"),
        (
            {"type": "function_call", "call_id": "c", "name": "a b", "arguments": ""},
            BAD,
            "input[0].name",
        ),
        (
            {"type": "function_call", "call_id": "c", "name": "f", "arguments": "", "namespace": 1},
            BAD,
            "input[0].namespace",
        ),
        (
            {"type": "reasoning", "summary": [{"type": "reasoning_text", "text": "x"}]},
            BAD,
            "input[0].summary[0].type",
        ),
        ({"type": "item_reference", "id": "x"}, BAD, "input[0].type"),
    ],
)
def test_lmsp_narrows_wire_items(item, code, param):
    # What LMSP 1.0 takes is narrower than wire's items; each fault names its field.
    with pytest.raises(APIError) as info:
        parse_request({"model": "m", "input": [item]})
    assert (info.value.code, info.value.param) == (code, param)

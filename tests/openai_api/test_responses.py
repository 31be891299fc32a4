"""The Responses API through the official openai SDK, on the standalone server."""

from __future__ import annotations

import json
import re

import httpx
import jsonschema
import openai
import pytest
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter
from support.no_eos import RUN_TO_CAP
from support.openresponses_schema import validate_event
from support.slow_model import CRAMPED_ARGS, RUNNING_TEXT, TOO_LONG_BESIDE, generating, slow_model

from jupyter_superfluid.store import Event, NewResponse, NewSession, Store, new_id

CHATML = "superfluid/tiny-chatml"
QWEN = "superfluid/tiny-qwen3"
EVENTS = TypeAdapter(ResponseStreamEvent)
CITY = {
    "type": "object",
    "properties": {"city": {"enum": ["Paris", "Oslo"]}},
    "required": ["city"],
    "additionalProperties": False,
}
WEATHER = {"type": "function", "name": "get_weather", "description": "Weather.", "parameters": CITY}
CRM = {
    "type": "namespace",
    "name": "crm",
    "description": "Customers.",
    "tools": [
        {
            "type": "function",
            "name": "lookup",
            "parameters": {
                "type": "object",
                "properties": {"id": {"type": "integer"}},
                "required": ["id"],
                "additionalProperties": False,
            },
        }
    ],
}
PERSON = {
    "type": "object",
    "properties": {"name": {"enum": ["ada", "bob"]}, "age": {"type": "integer"}},
    "required": ["name", "age"],
    "additionalProperties": False,
}


def test_create_returns_the_spec_shape(openai_client):
    r = openai_client.responses.create(
        model=CHATML,
        input="Hello",
        instructions="Be terse.",
        max_output_tokens=12,
        temperature=0.5,
        top_p=0.9,
        metadata={"k": "v"},
        extra_body=RUN_TO_CAP,
    )
    assert re.fullmatch(r"resp_[0-9a-f]{32}", r.id)
    assert r.object == "response" and r.status == "incomplete"
    assert r.model == CHATML and r.previous_response_id is None and r.store is True
    assert r.instructions == "Be terse." and r.metadata == {"k": "v"}
    assert (r.temperature, r.top_p, r.max_output_tokens) == (0.5, 0.9, 12)
    assert r.parallel_tool_calls is True and r.truncation == "disabled"
    assert r.tool_choice == "auto" and r.tools == [] and r.text.format.type == "text"
    hexid = r.id.removeprefix("resp_")
    for index, item in enumerate(r.output):
        assert item.id.endswith(f"{hexid}_{index}")
    [msg] = r.output
    assert msg.type == "message" and msg.content[0].type == "output_text"
    assert msg.content[0].annotations == [] and msg.content[0].logprobs == []
    u = r.usage
    assert u.total_tokens == u.input_tokens + u.output_tokens
    assert 0 <= u.input_tokens_details.cached_tokens <= u.input_tokens
    assert r.incomplete_details.reason == "max_output_tokens" and u.output_tokens == 12


def test_incomplete_at_max_output_tokens(openai_client):
    r = openai_client.responses.create(
        model=CHATML, input="x", max_output_tokens=2, extra_body={"seed": 7}
    )
    assert r.status == "incomplete"
    assert r.incomplete_details.reason == "max_output_tokens"
    assert r.usage.output_tokens == 2


def test_stream_events_in_order_and_typed(openai_client):
    with openai_client.responses.stream(
        model=CHATML, input="stream", max_output_tokens=300, extra_body={"seed": 3}
    ) as stream:
        events = list(stream)
        final = stream.get_final_response()
    names = [e.type for e in events]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert names[:2] == ["response.created", "response.in_progress"]
    assert names[-1] == "response.completed"  # seed 3 ends the answer within the cap
    assert len(final.output) == 1
    body = names[2:-1]
    expected = []
    for item in final.output:
        assert item.type == "message"
        deltas = [n for n in body if n == "response.output_text.delta"]
        expected += [
            "response.output_item.added",
            "response.content_part.added",
            *deltas,
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
        ]
    assert body == expected
    assert events[0].response.status == "in_progress" and events[0].response.output == []
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == final.output_text
    for e in events:  # every event parses into the SDK's own typed models
        EVENTS.validate_python(e.model_dump(mode="json", exclude_unset=True))
    stored = openai_client.responses.retrieve(final.id)
    assert stored.output_text == final.output_text and stored.usage == final.usage
    assert [o.id for o in stored.output] == [o.id for o in final.output]


def test_raw_stream_ends_with_the_done_marker(standalone):
    body = {"model": CHATML, "input": "raw", "max_output_tokens": 4, "stream": True}
    with httpx.stream("POST", standalone.base_url + "/responses", json=body, timeout=60) as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        assert int(r.headers["x-superfluid-warm"]) >= 0
        lines = list(r.iter_lines())
    assert [ln for ln in lines if ln][-1] == "data: [DONE]"
    assert sum("[DONE]" in ln for ln in lines) == 1
    events = [ln[7:] for ln in lines if ln.startswith("event: ")]
    datas = [json.loads(ln[6:]) for ln in lines if ln.startswith("data: {")]
    assert events == [d["type"] for d in datas]


def test_reasoning_items_with_thinking_and_none_without(openai_client):
    thinking = openai_client.responses.create(
        model=QWEN, input="think", max_output_tokens=60, extra_body={"seed": 2}
    )
    first = thinking.output[0]
    assert first.type == "reasoning" and first.summary == []
    assert first.content[0].type == "reasoning_text" and first.content[0].text
    assert thinking.usage.output_tokens_details.reasoning_tokens > 0
    plain = openai_client.responses.create(
        model=QWEN,
        input="think",
        max_output_tokens=60,
        reasoning={"effort": "none"},
        extra_body={"seed": 2},
    )
    assert all(o.type != "reasoning" for o in plain.output)
    assert plain.usage.output_tokens_details.reasoning_tokens == 0
    assert plain.reasoning.effort == "none"


@pytest.mark.parametrize(
    ("tools", "choice", "name", "namespace"),
    [
        ([WEATHER], "required", "get_weather", None),
        ([WEATHER, CRM], {"type": "function", "name": "get_weather"}, "get_weather", None),
        ([WEATHER, CRM], {"type": "function", "name": "crm.lookup"}, "lookup", "crm"),
    ],
)
def test_forced_calls_plain_and_namespaced(openai_client, tools, choice, name, namespace):
    r = openai_client.responses.create(
        model=QWEN,
        input="call",
        tools=tools,
        tool_choice=choice,
        max_output_tokens=200,
        reasoning={"effort": "none"},
        extra_body={"seed": 5},
    )
    calls = [o for o in r.output if o.type == "function_call"]
    assert r.status == "completed" and len(calls) == 1
    call = calls[0]
    assert (call.name, call.namespace) == (name, namespace)
    assert call.call_id.startswith("call_") and call.status == "completed"
    schema = CITY if name == "get_weather" else CRM["tools"][0]["parameters"]
    jsonschema.validate(json.loads(call.arguments), schema)


def test_tool_loop_and_output_round_trips_as_input(openai_client):
    first = openai_client.responses.create(
        model=QWEN,
        input="weather in Paris?",
        tools=[WEATHER],
        tool_choice="required",
        max_output_tokens=200,
        extra_body={"seed": 6},
    )
    call = next(o for o in first.output if o.type == "function_call")
    # A client managing its own context sends the output back as is, plus the result.
    items = [
        {"role": "user", "content": "weather in Paris?"},
        *[o.model_dump(exclude_none=True) for o in first.output],
        {"type": "function_call_output", "call_id": call.call_id, "output": '{"temp": 17}'},
    ]
    second = openai_client.responses.create(
        model=QWEN,
        input=items,
        tools=[WEATHER],
        tool_choice="none",
        max_output_tokens=30,
        extra_body={"seed": 6},
    )
    assert second.status == "incomplete" and second.usage.output_tokens == 30  # seed 6
    assert all(o.type != "function_call" for o in second.output)
    listed = openai_client.responses.input_items.list(second.id, order="asc").data
    assert [i.type for i in listed] == [i.get("type", "message") for i in items]
    # Continuing by id instead gives the model the same conversation.
    third = openai_client.responses.create(
        previous_response_id=first.id,
        tools=[WEATHER],
        tool_choice="none",
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "17"}],
        max_output_tokens=10,
    )
    assert third.model == QWEN and third.previous_response_id == first.id


def forced(client: openai.OpenAI, model: str, cap: int, **kwargs) -> Response:
    """A call forced to get_weather (seeded), cut at ``cap`` tokens."""
    if model == QWEN:
        kwargs["reasoning"] = {"effort": "none"}  # the cap goes to the call alone
    return client.responses.create(
        model=model,
        input="weather?",
        tools=[WEATHER],
        tool_choice="required",
        max_output_tokens=cap,
        extra_body={"seed": 1},
        **kwargs,
    )


@pytest.mark.parametrize("model", [QWEN, CHATML])
def test_a_forced_call_cut_before_its_name_is_no_output_item(openai_client, model):
    # 20 tokens: the call's opening (<tool_call>, or the generic {"tool_call": ...)
    # and at most part of its name. A call without its name is nothing to run or
    # send back (OpenAI never shows one); its markup is no message text either.
    cut = forced(openai_client, model, 20)
    assert cut.status == "incomplete" and cut.incomplete_details.reason == "max_output_tokens"
    assert cut.output == [] and cut.usage.output_tokens == 20
    with forced(openai_client, model, 20, stream=True) as stream:
        types = [e.type for e in stream]
    assert types == ["response.created", "response.in_progress", "response.incomplete"]
    # The stored turn is continued like any other.
    more = openai_client.responses.create(
        previous_response_id=cut.id,
        input="go on",
        tools=[WEATHER],
        max_output_tokens=4,
        extra_body=RUN_TO_CAP,
    )
    assert more.previous_response_id == cut.id and more.usage.output_tokens == 4


@pytest.mark.parametrize("model", [QWEN, CHATML])
def test_a_forced_call_cut_in_its_arguments_round_trips_as_input(openai_client, model):
    cut = forced(openai_client, model, 52)  # the whole name, the arguments cut short
    assert cut.status == "incomplete"
    [call] = cut.output
    assert call.type == "function_call" and call.status == "incomplete"
    assert call.name == "get_weather" and call.arguments.startswith("{")
    # The usual SDK loop sends the output back as input; continuing by id works too.
    items = [{"role": "user", "content": "weather?"}, call.model_dump(exclude_none=True)]
    again = openai_client.responses.create(
        model=model, input=items, tools=[WEATHER], max_output_tokens=4, extra_body=RUN_TO_CAP
    )
    assert again.usage.output_tokens == 4
    listed = openai_client.responses.input_items.list(again.id, order="asc").data
    assert [i.type for i in listed] == ["message", "function_call"]
    more = openai_client.responses.create(
        previous_response_id=cut.id,
        input="go on",
        tools=[WEATHER],
        max_output_tokens=4,
        extra_body=RUN_TO_CAP,
    )
    assert more.usage.output_tokens == 4


def test_json_schema_output_validates(openai_client):
    r = openai_client.responses.create(
        model=CHATML,
        input="person",
        max_output_tokens=200,
        extra_body={"seed": 4},
        text={
            "format": {"type": "json_schema", "name": "person", "schema": PERSON, "strict": True}
        },
    )
    assert r.status == "completed"
    jsonschema.validate(json.loads(r.output_text), PERSON)
    assert r.text.format.type == "json_schema"


def test_previous_response_chain_defaults_model(openai_client):
    a = openai_client.responses.create(model=QWEN, input="My name is Ada.", max_output_tokens=8)
    b = openai_client.responses.create(
        previous_response_id=a.id, input="Name?", max_output_tokens=8
    )
    c = openai_client.responses.create(
        previous_response_id=b.id, input="Again?", max_output_tokens=8
    )
    assert (b.model, c.model) == (QWEN, QWEN)
    assert c.previous_response_id == b.id and b.previous_response_id == a.id
    assert c.usage.input_tokens > b.usage.input_tokens > a.usage.input_tokens


def test_retrieve_delete_and_input_items_pagination(openai_client):
    items = [{"role": "user", "content": f"m{i}"} for i in range(5)]
    r = openai_client.responses.create(model=CHATML, input=items, max_output_tokens=3)
    assert openai_client.responses.retrieve(r.id).id == r.id
    desc = openai_client.responses.input_items.list(r.id, limit=2)
    assert len(desc.data) == 2 and desc.has_more
    texts = [i.content[0].text for i in desc.data]
    assert texts == ["m4", "m3"]
    rest = openai_client.responses.input_items.list(r.id, limit=10, after=desc.last_id)
    assert [i.content[0].text for i in rest.data] == ["m2", "m1", "m0"] and not rest.has_more
    asc = openai_client.responses.input_items.list(r.id, order="asc", limit=3)
    assert [i.content[0].text for i in asc.data] == ["m0", "m1", "m2"] and asc.has_more
    deleted = openai_client.responses.delete(r.id)
    assert deleted is None or getattr(deleted, "deleted", True)
    with pytest.raises(openai.NotFoundError):
        openai_client.responses.retrieve(r.id)


def test_delete_body_shape(standalone, openai_client):
    r = openai_client.responses.create(model=CHATML, input="x", max_output_tokens=2)
    out = httpx.delete(f"{standalone.base_url}/responses/{r.id}", timeout=30)
    assert out.json() == {"id": r.id, "object": "response", "deleted": True}


def test_store_false_is_answered_not_kept(openai_client):
    r = openai_client.responses.create(model=CHATML, input="x", max_output_tokens=2, store=False)
    assert r.store is False and r.output is not None
    with pytest.raises(openai.NotFoundError):
        openai_client.responses.retrieve(r.id)
    with pytest.raises(openai.BadRequestError) as info:
        openai_client.responses.create(previous_response_id=r.id, input="y")
    assert info.value.code == "previous_response_not_found"
    assert info.value.body["param"] == "previous_response_id"


BAD = [
    ({"model": CHATML}, "input", None),
    ({"input": "x"}, "model", None),
    ({"model": "ghost", "input": "x"}, "model", "model_not_found"),
    (
        {"model": CHATML, "input": "x", "previous_response_id": "resp_nope"},
        "previous_response_id",
        "previous_response_not_found",
    ),
    (
        {"model": CHATML, "input": "x", "tools": [{"type": "web_search"}]},
        "tools[0].type",
        "unsupported_tool",
    ),
    (
        {"model": CHATML, "input": "x", "tools": [{"type": "code_interpreter"}]},
        "tools[0].type",
        "unsupported_tool",
    ),
    (
        {"model": CHATML, "input": "x", "background": True, "store": False},
        "store",
        "invalid_request",
    ),
    (
        {"model": CHATML, "input": "x", "prompt": {"id": "pmpt_1"}},
        "prompt",
        "unsupported_parameter",
    ),
    (
        {"model": CHATML, "input": [{"type": "item_reference", "id": "msg_1"}]},
        "input[0]",
        "unsupported_parameter",
    ),
    (
        {
            "model": CHATML,
            "input": [{"role": "user", "content": [{"type": "input_file", "file_id": "file_1"}]}],
        },
        "input[0].content[0].file_id",
        "unsupported_parameter",
    ),
    (
        {
            "model": CHATML,
            "input": [{"role": "user", "content": [{"type": "input_image", "file_id": "file_1"}]}],
        },
        "input[0].content[0]",
        "unsupported_parameter",
    ),
    (
        {
            "model": CHATML,
            "input": [
                {
                    "role": "user",
                    "content": [{"type": "input_image", "image_url": "https://example.com/a.png"}],
                }
            ],
        },
        "input[0].content[0].image_url",
        "unsupported_input",
    ),
    (
        {
            "model": CHATML,
            "input": [
                {
                    "role": "user",
                    "content": [{"type": "input_image", "image_url": "data:image/png;base64,AA=="}],
                }
            ],
        },
        "input[0].content[0]",
        "unsupported_input",
    ),
    (
        {"model": CHATML, "input": "x", "tool_choice": {"type": "file_search"}},
        "tool_choice",
        "unsupported_parameter",
    ),
    (
        {
            "model": CHATML,
            "input": "x",
            "tools": [WEATHER],
            "tool_choice": {"type": "function", "name": "ghost"},
        },
        "tool_choice.name",
        None,
    ),
    ({"model": CHATML, "input": "x", "temperature": 3}, "temperature", None),
    ({"model": CHATML, "input": "x", "max_output_tokens": 0}, "max_output_tokens", None),
    ({"model": CHATML, "input": [{"role": "robot", "content": "x"}]}, "input[0].role", None),
    (
        {"model": CHATML, "input": "x", "text": {"format": {"type": "json_schema"}}},
        "text.format.schema",
        None,
    ),
    ({"model": CHATML, "input": "x", "reasoning": {"effort": "max"}}, "reasoning.effort", None),
]


@pytest.mark.parametrize(("body", "param", "code"), BAD)
def test_bad_requests_are_400_naming_the_field(standalone, body, param, code):
    r = httpx.post(standalone.base_url + "/responses", json=body, timeout=30)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["param"] == param, err
    assert err["type"] == "invalid_request_error"
    if code:
        assert err["code"] == code


def test_sdk_surfaces_errors_with_code_and_param(openai_client):
    with pytest.raises(openai.BadRequestError) as info:
        openai_client.responses.create(model=CHATML, input="x", previous_response_id="resp_0")
    assert info.value.code == "previous_response_not_found"
    with pytest.raises(openai.BadRequestError) as info:
        openai_client.responses.create(model=CHATML, input="x", tools=[{"type": "web_search"}])
    assert info.value.code == "unsupported_tool"
    with pytest.raises(openai.NotFoundError):
        openai_client.responses.retrieve("resp_unknown")
    with pytest.raises(openai.NotFoundError):
        openai_client.responses.input_items.list("resp_unknown")


def test_cancel_is_400(openai_client):
    r = openai_client.responses.create(model=CHATML, input="x", max_output_tokens=2)
    with pytest.raises(openai.BadRequestError) as info:
        openai_client.responses.cancel(r.id)
    assert info.value.code == "unsupported_parameter"


def test_final_response_validates_as_sdk_model(openai_client):
    r = openai_client.responses.create(
        model=QWEN, input="v", max_output_tokens=20, tools=[WEATHER, CRM]
    )
    Response.model_validate(r.model_dump(mode="json"))


IGNORED = {
    "user": "u1",
    "safety_identifier": "s",
    "prompt_cache_key": "k",
    "service_tier": "auto",
    "include": ["reasoning.encrypted_content"],
    "top_logprobs": 2,
    "max_tool_calls": 3,
    "stream_options": {"include_obfuscation": False},
}


def test_ignored_fields_are_accepted(standalone):
    body = {"model": CHATML, "input": "x", "max_output_tokens": 2, **IGNORED}
    r = httpx.post(standalone.base_url + "/responses", json=body, timeout=30)
    assert r.status_code == 200, r.text


def test_audio_input_is_refused_clearly(standalone):
    body = {
        "model": CHATML,
        "max_output_tokens": 2,
        "input": [
            {
                "role": "user",
                "content": [
                    {"type": "input_audio", "input_audio": {"data": "AA==", "format": "wav"}}
                ],
            }
        ],
    }
    r = httpx.post(standalone.base_url + "/responses", json=body, timeout=30)
    assert r.status_code == 400
    assert r.json()["error"]["code"] == "unsupported_input"


def test_reasoning_and_call_items_join_their_turns(openai_client):
    items = [
        {"role": "user", "content": "q"},
        {
            "type": "reasoning",
            "summary": [],
            "content": [{"type": "reasoning_text", "text": "thinking"}],
        },
        {
            "type": "function_call",
            "call_id": "c1",
            "name": "get_weather",
            "arguments": '{"city": "Paris"}',
        },
        {
            "type": "function_call_output",
            "call_id": "c1",
            "output": [{"type": "input_text", "text": "sunny"}],
        },
    ]
    r = openai_client.responses.create(
        model=QWEN, input=items, tools=[WEATHER], max_output_tokens=3, extra_body=RUN_TO_CAP
    )
    assert r.status == "incomplete" and r.usage.output_tokens == 3


def test_generation_failure_mid_stream_is_error_then_failed(sf_start_standalone, sf_model_cache):
    # Beside a running answer, a prompt that does not fit the shared KV cache: the
    # engine fails the newer one once its stream began, which must end with error +
    # response.failed (``slow_model.TOO_LONG_BESIDE``).
    slow = f"slow={slow_model(sf_model_cache)}"
    server = sf_start_standalone(*CRAMPED_ARGS, models=(slow,))
    url = server.base_url + "/responses"
    body = {"model": "slow", "stream": True, **RUN_TO_CAP}
    running = {**body, "input": RUNNING_TEXT, "max_output_tokens": 1500}
    with (
        generating(url, running),
        httpx.stream(
            "POST",
            url,
            json={**body, "input": TOO_LONG_BESIDE, "max_output_tokens": 8},
            timeout=120,
        ) as r,
    ):
        lines = [ln for ln in r.iter_lines() if ln.startswith("data: ")]
    assert lines[-1] == "data: [DONE]"  # after error and response.failed too
    events = [json.loads(ln[6:]) for ln in lines[:-1]]
    types = [e["type"] for e in events]
    assert types == ["response.created", "response.in_progress", "error", "response.failed"]
    for event in events:  # the failure's events are OpenResponses events too
        validate_event(event)
    assert events[-2]["message"] == "KV cache full"
    assert events[-1]["response"]["status"] == "failed"
    rid = events[-1]["response"]["id"]
    assert httpx.get(f"{server.base_url}/responses/{rid}").status_code == 404


def test_reasoning_tokens_are_a_part_of_output_tokens(openai_client):
    for seed in range(5):
        r = openai_client.responses.create(
            model=QWEN, input="t", max_output_tokens=40, extra_body={"seed": seed}
        )
        details = r.usage.output_tokens_details
        assert 0 < details.reasoning_tokens <= r.usage.output_tokens


@pytest.mark.parametrize(
    ("path", "body", "param"),
    [
        (
            "/responses",
            {
                "model": CHATML,
                "input": "x",
                "text": {
                    "format": {
                        "type": "json_schema",
                        "name": "bad",
                        "schema": {"type": "object", "properties": {"a": {"$ref": "#/nowhere"}}},
                    }
                },
            },
            "text.format.schema",
        ),
        (
            "/chat/completions",
            {
                "model": CHATML,
                "messages": [{"role": "user", "content": "x"}],
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {
                        "name": "bad",
                        "schema": {"type": "object", "properties": {"a": {"$ref": "#/nowhere"}}},
                    },
                },
            },
            "response_format.json_schema.schema",
        ),
    ],
)
def test_unenforceable_schema_is_400(standalone, path, body, param):
    r = httpx.post(standalone.base_url + path, json=body, timeout=30)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == param


def test_lmsp_stored_response_reads_as_openai(standalone, openai_client):
    body = {
        "model": CHATML,
        "store": True,
        "max_output_tokens": 5,
        "input": [
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "from lmsp"}],
            }
        ],
    }
    made = httpx.post(standalone.url + "/lmsp/v1/responses", json=body, timeout=60).json()
    r = openai_client.responses.retrieve(made["id"])
    Response.model_validate(r.model_dump(mode="json"))
    assert r.id == made["id"] and r.model == CHATML
    assert r.usage.output_tokens == made["usage"]["output_tokens"]
    items = openai_client.responses.input_items.list(made["id"])
    assert [i.content[0].text for i in items.data] == ["from lmsp"]
    nxt = openai_client.responses.create(
        previous_response_id=made["id"], input="via openai", max_output_tokens=3
    )
    assert nxt.previous_response_id == made["id"]
    listed = httpx.get(standalone.base_url + "/responses", params={"limit": 100}).json()
    row = next(d for d in listed["data"] if d["id"] == made["id"])
    assert row["preview"].startswith("from lmsp")


def test_a_nameless_call_an_earlier_version_stored_is_left_out_of_the_continuation(
    sf_start_standalone, tmp_path
):
    # Earlier versions stored a call the token cap cut before its name as a function_call
    # with an empty name; continuing such a response must not fail on that item.
    sessions = tmp_path / "sessions"
    nameless = {"id": "fc_old_0", "type": "function_call", "call_id": "call_old_0", "name": ""}
    nameless.update(arguments='<tool_call>\n{"na', status="incomplete")
    with Store(sessions) as store:
        store.commit_turn(
            NewSession(new_id("sess"), CHATML),
            [Event("input", (1, 2, 3))],
            NewResponse(
                "resp_old",
                CHATML,
                "incomplete",
                {"schema": 2, "status": "incomplete", "incomplete_reason": "max_output_tokens"},
                input_items=[{"type": "message", "role": "user", "content": "weather?"}],
                output_items=[nameless],
            ),
        )
    server = sf_start_standalone(sessions_dir=sessions)
    client = openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0)
    more = client.responses.create(
        previous_response_id="resp_old", input="go on", max_output_tokens=4, extra_body=RUN_TO_CAP
    )
    assert more.previous_response_id == "resp_old" and more.usage.output_tokens == 4

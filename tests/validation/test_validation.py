"""Typed wire models at the edge: each malformed input is a 400 naming its exact field."""

from __future__ import annotations

import json

import httpx
import pytest

CHATML = "superfluid/tiny-chatml"
USER = {"role": "user", "content": [{"type": "input_text", "text": "hi"}]}
LMSP_USER = {"type": "message", **USER}
RESPONSES = {"model": CHATML, "input": [USER], "max_output_tokens": 2}
CHAT = {"model": CHATML, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
LMSP = {"model": CHATML, "input": [LMSP_USER], "max_output_tokens": 2}
BAD_SCHEMAS = [
    {"type": "string", "maxLength": 100000},
    {"type": "array", "items": {"type": "string"}, "minItems": 10**9},
    {"type": "array", "items": {"type": "string"}, "maxItems": 5000},
    {"properties": []},
    {"$ref": 5},
    {"anyOf": []},
    {"items": [1, 2]},
    {"enum": list(range(5000))},
    {"type": "object", "properties": {"a": {"enum": []}}},  # a grammar of nothing
    {"type": "object", "properties": {"a": {"type": "array", "maxItems": 10**12}}},
    {"type": "string", "pattern": "^a{0,20000}$"},
]


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def raw(path: str, body: bytes, **kw) -> httpx.Response:
    return httpx.post(path, content=body, timeout=30, **kw)


@pytest.mark.parametrize(
    ("path", "body", "param"),
    [
        ("/v1/responses", {**RESPONSES, "input": [{**USER, "role": ["user"]}]}, "input[0].role"),
        ("/v1/responses", {**RESPONSES, "input": [{"type": {}, "x": 1}]}, "input[0].type"),
        (
            "/v1/responses",
            {
                **RESPONSES,
                "input": [
                    USER,
                    USER,
                    {"role": "user", "content": [{"type": "input_text", "text": 5}]},
                ],
            },
            "input[2].content[0].text",
        ),
        ("/v1/responses", {**RESPONSES, "tools": [{"type": ["function"]}]}, "tools[0].type"),
        ("/v1/responses", {**RESPONSES, "tool_choice": 5}, "tool_choice"),
        ("/v1/responses", {**RESPONSES, "seed": 2**70}, "seed"),
        ("/v1/responses", {**RESPONSES, "max_output_tokens": "5"}, "max_output_tokens"),
        ("/v1/responses", {**RESPONSES, "metadata": {"k": 5}}, "metadata.k"),
        ("/v1/responses", {**RESPONSES, "logit_bias": {"x": 1}}, "logit_bias.x"),
        ("/v1/chat/completions", {**CHAT, "messages": [{"role": {"a": 1}}]}, "messages[0].role"),
        (
            "/v1/chat/completions",
            {**CHAT, "messages": [{"role": "assistant", "tool_calls": 5}]},
            "messages[0].tool_calls",
        ),
        (
            "/v1/chat/completions",
            {**CHAT, "tools": [{"type": "function", "function": {"name": 5}}]},
            "tools[0].function.name",
        ),
        ("/v1/chat/completions", {**CHAT, "messages": [[1]]}, "messages[0]"),
        ("/v1/chat/completions", {**CHAT, "stop": [1]}, "stop[0]"),
        (
            "/lmsp/v1/responses",
            {**LMSP, "extensions": {"superfluid": {"logit_bias": {"x": 1}}}},
            "extensions.superfluid.logit_bias.x",
        ),
        (
            "/lmsp/v1/responses",
            {**LMSP, "extensions": {"superfluid": {"logit_bias": {"²": 1}}}},
            "extensions.superfluid.logit_bias.²",
        ),
        ("/lmsp/v1/responses", {**LMSP, "input": [{"type": ["message"]}]}, "input[0].type"),
        (
            "/lmsp/v1/responses",
            {**LMSP, "input": [{**LMSP_USER, "content": [{"type": {}}]}]},
            "input[0].content[0].type",
        ),
    ],
)
def test_wrong_types_are_400_naming_the_field(standalone, path, body, param):
    r = httpx.post(standalone.url + path, json=body, timeout=30)
    assert r.status_code == 400, r.text
    doc = r.json()
    assert (doc["param"] if path.startswith("/lmsp") else doc["error"]["param"]) == param, doc


@pytest.mark.parametrize("path", ["/v1/responses", "/v1/chat/completions", "/lmsp/v1/responses"])
@pytest.mark.parametrize(
    ("body", "param"),
    [
        (b'{"model": NaN, "input": "x"}', None),
        (b'{"model": "m", "input": Infinity}', None),
        (nested(1000).encode(), None),
        (('{"x": ' + nested(80) + "}").encode(), None),
    ],
)
def test_json_with_nan_or_deep_nesting_is_400(standalone, path, body, param):
    r = raw(standalone.url + path, body)
    assert r.status_code == 400, r.text


@pytest.mark.parametrize(
    ("path", "body", "param"),
    [
        (
            "/v1/responses",
            {
                **RESPONSES,
                "input": [
                    USER,
                    {"role": "user", "content": [{"type": "input_text", "text": "a\ud800"}]},
                ],
            },
            "input[1].content[0].text",
        ),
        (
            "/v1/chat/completions",
            {**CHAT, "messages": [{"role": "user", "content": "\udfff"}]},
            "messages[0].content",
        ),
        (
            "/lmsp/v1/responses",
            {
                **LMSP,
                "input": [{**LMSP_USER, "content": [{"type": "input_text", "text": "\ud800"}]}],
            },
            "input[0].content[0].text",
        ),
    ],
)
def test_lone_surrogates_are_400_naming_the_text(standalone, path, body, param):
    r = raw(standalone.url + path, json.dumps(body).encode())  # ensure_ascii keeps \\ud800
    assert r.status_code == 400, r.text
    doc = r.json()
    assert (doc["param"] if path.startswith("/lmsp") else doc["error"]["param"]) == param


@pytest.mark.parametrize("schema", BAD_SCHEMAS, ids=range(len(BAD_SCHEMAS)))
@pytest.mark.parametrize(
    ("path", "wrap", "param"),
    [
        (
            "/v1/responses",
            lambda s: {
                **RESPONSES,
                "text": {"format": {"type": "json_schema", "name": "o", "schema": s}},
            },
            "text.format.schema",
        ),
        (
            "/v1/responses",
            lambda s: {**RESPONSES, "tools": [{"type": "function", "name": "f", "parameters": s}]},
            "tools[0].parameters",
        ),
        (
            "/v1/chat/completions",
            lambda s: {
                **CHAT,
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": "o", "schema": s},
                },
            },
            "response_format.json_schema.schema",
        ),
        (
            "/v1/chat/completions",
            lambda s: {
                **CHAT,
                "tools": [{"type": "function", "function": {"name": "f", "parameters": s}}],
            },
            "tools[0].function.parameters",
        ),
        (
            "/lmsp/v1/responses",
            lambda s: {
                **LMSP,
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": "o", "schema": s},
                },
            },
            "response_format.json_schema.schema",
        ),
    ],
)
def test_schemas_that_are_not_or_too_big_are_400(standalone, schema, path, wrap, param):
    r = httpx.post(standalone.url + path, json=wrap(schema), timeout=30)
    assert r.status_code == 400, r.text
    doc = r.json()
    assert (doc["param"] if path.startswith("/lmsp") else doc["error"]["param"]) == param
    # The server is still there and still generates.
    assert (
        httpx.post(standalone.url + "/v1/chat/completions", json=CHAT, timeout=60).status_code
        == 200
    )


@pytest.mark.parametrize("isolation", ["process", "thread"])
def test_a_grammar_the_engine_refuses_is_400_naming_the_field(sf_model_cache, tmp_path, isolation):
    # Past the edge's checks (built here directly), llama.cpp's grammar parser refuses a
    # string of up to 1400 characters; the chat path answers that as the field's 400,
    # whether the engine runs in a thread or in an engine process (which refuses it
    # at the first event rather than at the call).
    import asyncio

    from jupyter_superfluid.chat.types import ChatMessage, ChatRequest, OutputFormat
    from jupyter_superfluid.engine.launch import launcher_for
    from jupyter_superfluid.errors import InvalidRequest
    from jupyter_superfluid.generation.service import ChatService
    from jupyter_superfluid.models.hub import ModelHub
    from jupyter_superfluid.models.lifecycle import ModelLifecycle
    from jupyter_superfluid.models.registry import ModelRegistry
    from jupyter_superfluid.store import Store

    async def run() -> InvalidRequest:
        registry = ModelRegistry(
            [CHATML],
            cache_dir=sf_model_cache,
            context_size=512,
            launcher=launcher_for(isolation),
        )
        hub = ModelHub(ModelLifecycle(registry))
        store = Store(tmp_path)
        chat = ChatService(hub, store)
        schema = {"type": "string", "maxLength": 1400}
        fmt = OutputFormat("json_schema", schema, "o", param="text.format.schema")
        request = ChatRequest(CHATML, (ChatMessage("user", "x"),), output_format=fmt)
        try:
            turn = await chat.prepare(request)
            with pytest.raises(InvalidRequest) as info:
                async for _ in chat.run(turn):
                    pass
            return info.value
        finally:
            await hub.close()
            store.close()

    err = asyncio.run(run())
    assert err.param == "text.format.schema" and "cannot be enforced" in err.message


def test_a_bounded_schema_still_generates_valid_json(standalone):
    import jsonschema

    schema = {
        "type": "object",
        "properties": {"a": {"type": "string", "maxLength": 8}},
        "required": ["a"],
    }
    body = {
        **CHAT,
        "max_tokens": 60,
        "seed": 3,
        "response_format": {"type": "json_schema", "json_schema": {"name": "o", "schema": schema}},
    }
    r = httpx.post(standalone.url + "/v1/chat/completions", json=body, timeout=60)
    assert r.status_code == 200, r.text
    out = r.json()["choices"][0]
    if out["finish_reason"] == "stop":
        jsonschema.validate(json.loads(out["message"]["content"]), schema)


@pytest.mark.parametrize(
    ("params", "headers", "param"),
    [
        ({"after": "18446744073709551616"}, {}, "after"),
        ({"after": "²"}, {}, "after"),
        ({"after": "-1"}, {}, "after"),
        ({}, {"Last-Event-ID": "99999999999999999999"}, "Last-Event-ID"),
    ],
)
def test_event_ids_out_of_range_are_400(standalone, params, headers, param):
    url = standalone.url + "/lmsp/v1"
    task = httpx.post(url + "/tasks", json=LMSP, timeout=30).json()
    r = httpx.get(f"{url}/tasks/{task['id']}/events", params=params, headers=headers, timeout=30)
    assert r.status_code == 400 and r.json()["param"] == param, r.text


@pytest.mark.parametrize(
    ("params", "param"),
    [
        ({"limit": "0"}, "limit"),
        ({"limit": "x"}, "limit"),
        ({"order": "up"}, "order"),
        ({"limit": "²"}, "limit"),
    ],
)
def test_list_queries_are_typed(standalone, params, param):
    rid = httpx.post(standalone.base_url + "/responses", json=RESPONSES, timeout=60).json()["id"]
    for path in ("/responses", f"/responses/{rid}/input_items"):
        r = httpx.get(standalone.base_url + path, params=params, timeout=30)
        assert r.status_code == 400 and r.json()["error"]["param"] == param, r.text

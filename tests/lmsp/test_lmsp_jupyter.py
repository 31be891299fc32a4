"""LMSP inside a real Jupyter server: under its base URL, with Jupyter's auth."""

from __future__ import annotations

import asyncio
import json

import pytest
from tornado.httpclient import HTTPClientError

from .helpers import PROBLEM_KEYS, events_of, request


async def test_lmsp_lives_under_the_base_url(jp_fetch, jp_base_url):
    r = await jp_fetch("lmsp", "v1")
    assert r.headers["LMSP-Version"] == "1.0"
    links = json.loads(r.body)["links"]
    assert links["models"] == f"{jp_base_url}lmsp/v1/models"
    models = json.loads((await jp_fetch("lmsp", "v1", "models")).body)
    assert [m["id"] for m in models["data"]] == ["superfluid/tiny-chatml", "superfluid/tiny-qwen3"]


async def test_responses_streams_and_tasks_in_jupyter(jp_fetch, jp_base_url):
    body = request(max_output_tokens=6, seed=1)
    r = await jp_fetch("lmsp", "v1", "responses", method="POST", body=json.dumps(body))
    assert r.headers["Content-Type"].startswith("application/json")
    assert json.loads(r.body)["object"] == "response"
    body["stream"] = True
    r = await jp_fetch("lmsp", "v1", "responses", method="POST", body=json.dumps(body))
    assert r.headers["Content-Type"].startswith("text/event-stream")
    events = events_of(r.body.decode())
    assert [e.id for e in events] == list(range(1, len(events) + 1))
    del body["stream"]
    r = await jp_fetch("lmsp", "v1", "tasks", method="POST", body=json.dumps(body))
    assert r.code == 202
    task = json.loads(r.body)
    assert task["links"]["events"] == f"{jp_base_url}lmsp/v1/tasks/{task['id']}/events"
    for _ in range(200):
        task = json.loads((await jp_fetch("lmsp", "v1", "tasks", task["id"])).body)
        if task["status"] in ("completed", "incomplete"):
            break
        await asyncio.sleep(0.05)
    assert task["response"]["id"] == task["response_id"]


@pytest.mark.parametrize(
    ("parts", "method", "headers", "status", "code"),
    [
        (("lmsp", "v1", "nowhere"), "GET", None, 404, "not_found"),
        (("lmsp", "v1", "models"), "DELETE", None, 405, "method_not_allowed"),
        (("lmsp", "v1", "models"), "GET", {"LMSP-Version": "3"}, 400, "unsupported_version"),
        (("lmsp", "v1", "models"), "GET", {"Authorization": ""}, 401, "unauthorized"),
        (("lmsp", "v1", "responses"), "POST", {"Authorization": ""}, 401, "unauthorized"),
    ],
)
async def test_errors_in_jupyter_are_problem_documents(
    jp_fetch, parts, method, headers, status, code
):
    body = "{}" if method == "POST" else None
    with pytest.raises(HTTPClientError) as info:
        await jp_fetch(*parts, method=method, body=body, headers=headers or {})
    response = info.value.response
    assert info.value.code == status
    assert response.headers["Content-Type"].startswith("application/problem+json")
    assert response.headers["LMSP-Version"] == "1.0"
    doc = json.loads(response.body)
    assert set(doc) >= PROBLEM_KEYS and (doc["status"], doc["code"]) == (status, code)

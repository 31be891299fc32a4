"""Problem documents on every LMSP error path; tokens, scopes, and generation failures."""

from __future__ import annotations

import json
from contextlib import AbstractContextManager
from pathlib import Path

import httpx
import pytest
from support.no_eos import RUN_TO_CAP
from support.slow_model import CRAMPED_ARGS, RUNNING_TEXT, TOO_LONG_BESIDE, generating, slow_model

from .helpers import (
    CHATML,
    assert_problem,
    auth,
    long_request,
    request,
    user,
    wait_task,
)

SLOW = "slow"

BAD_BODIES = [
    (b"{not json", None),
    (b"[1, 2]", None),
    (json.dumps({"input": [user("x")]}).encode(), "model"),
    (json.dumps({"model": CHATML, "input": "hi"}).encode(), "input"),
    (json.dumps({"model": CHATML, "input": []}).encode(), "input"),
    (json.dumps({**request(), "temperature": "hot"}).encode(), "temperature"),
    (json.dumps({**request(), "max_output_tokens": 0}).encode(), "max_output_tokens"),
    (json.dumps({**request(), "stream": "yes"}).encode(), "stream"),
    (json.dumps({**request(), "store": 1}).encode(), "store"),
    (
        json.dumps({"model": CHATML, "input": [{"role": "developer", "content": []}]}).encode(),
        "input[0].role",
    ),
    (
        json.dumps(
            {"model": CHATML, "input": [{"role": "user", "content": [{"type": "input_text"}]}]}
        ).encode(),
        "input[0].content[0].text",
    ),
    (json.dumps({**request(), "tools": [{"type": "web_search"}]}).encode(), "tools[0].type"),
    (
        json.dumps({**request(), "response_format": {"type": "xml"}}).encode(),
        "response_format.type",
    ),
    (
        json.dumps({**request(), "response_format": {"type": "json_schema"}}).encode(),
        "response_format.json_schema",
    ),
    (  # a name no tool could have: a 400 from the one validation, not a 500 after it
        json.dumps({**request(), "tool_choice": {"type": "function", "name": "a b"}}).encode(),
        "tool_choice.name",
    ),
    (
        json.dumps(
            {**request(), "tool_choice": {"type": "function", "name": "f", "namespace": "n"}}
        ).encode(),
        "tool_choice.namespace",
    ),
]


@pytest.mark.parametrize("path", ["responses", "tasks"])
@pytest.mark.parametrize(("raw", "param"), BAD_BODIES)
def test_invalid_requests_are_problems_naming_the_field(url, path, raw, param):
    r = httpx.post(f"{url}/{path}", content=raw, timeout=30)
    assert_problem(r, 400, "invalid_request", param)


@pytest.mark.parametrize(
    ("method", "path", "status", "code", "param"),
    [
        ("POST", "/responses", 400, "model_not_found", "model"),
        ("GET", "/responses/resp_nope", 404, "response_not_found", "response_id"),
        ("GET", "/tasks/task_nope", 404, "task_not_found", "task_id"),
        ("GET", "/tasks/task_nope/events", 404, "task_not_found", "task_id"),
        ("POST", "/tasks/task_nope/cancel", 404, "task_not_found", "task_id"),
        ("GET", "/models/no-such-model", 404, "model_not_found", "model_id"),
        ("GET", "/no/such/endpoint", 404, "not_found", None),
        ("DELETE", "/models", 405, "method_not_allowed", None),
        ("PUT", "/responses", 405, "method_not_allowed", None),
        ("GET", "/tasks", 405, "method_not_allowed", None),
    ],
)
def test_lookups_and_routing_errors_are_problems(url, method, path, status, code, param):
    body = {**request(), "model": "no-such-model"} if method == "POST" else None
    r = httpx.request(method, url + path, json=body, timeout=30)
    assert_problem(r, status, code, param)


def test_bad_resume_point_and_key_are_problems(url):
    task = httpx.post(f"{url}/tasks", json=request(max_output_tokens=2), timeout=30).json()
    events = f"{url}/tasks/{task['id']}/events"
    assert_problem(httpx.get(events, params={"after": "x"}), 400, "invalid_request", "after")
    r = httpx.get(events, headers={"Last-Event-ID": "-1"})
    assert_problem(r, 400, "invalid_request", "Last-Event-ID")
    r = httpx.post(f"{url}/responses", json=request(), headers={"Idempotency-Key": "k" * 300})
    assert_problem(r, 400, "invalid_request", "Idempotency-Key")


@pytest.mark.parametrize(
    ("method", "path"),
    [("GET", ""), ("GET", "/models"), ("POST", "/responses"), ("GET", "/tasks/t"), ("GET", "/x")],
)
@pytest.mark.parametrize("headers", [{}, auth("sk-wrong"), {"Authorization": "Basic eA=="}])
def test_missing_or_wrong_token_is_401(keyed, method, path, headers):
    r = httpx.request(method, keyed + path, headers=headers, json={} if method == "POST" else None)
    assert_problem(r, 401, "unauthorized")
    assert r.headers["www-authenticate"].startswith("Bearer")


def test_scopes_are_enforced_per_key(keyed):
    def call(key, method, path, body=None):
        return httpx.request(method, keyed + path, headers=auth(key), json=body, timeout=60)

    body = request(max_output_tokens=3, store=True)
    assert call("sk-reader", "GET", "/models").status_code == 200
    assert call("sk-reader", "GET", "").status_code == 200  # the service document needs none
    for key, method, path, scope in [
        ("sk-reader", "POST", "/responses", "responses:write"),
        ("sk-reader", "POST", "/tasks", "tasks:write"),
        ("sk-writer", "GET", "/models", "models:read"),
        ("sk-writer", "GET", "/models/" + CHATML, "models:read"),
        ("sk-writer", "GET", "/responses/resp_x", "responses:read"),
        ("sk-writer", "GET", "/tasks/task_x", "tasks:read"),
        ("sk-writer", "GET", "/tasks/task_x/events", "tasks:read"),
        ("sk-writer", "POST", "/tasks/task_x/cancel", "tasks:write"),
        ("sk-tasker", "POST", "/responses", "responses:write"),
    ]:
        r = call(key, method, path, body if method == "POST" else None)
        doc = assert_problem(r, 403, "insufficient_scope")
        assert scope in doc["detail"]
    made = call("sk-writer", "POST", "/responses", body)
    assert made.status_code == 200
    # Each key is its own principal: another key sees nothing this one made.
    assert call("sk-full", "GET", f"/responses/{made.json()['id']}").status_code == 404
    task = call("sk-tasker", "POST", "/tasks", request(max_output_tokens=2, **RUN_TO_CAP))
    assert task.status_code == 202
    final = wait_task(keyed, task.json()["id"], auth("sk-tasker"))
    assert final["status"] == "incomplete"
    assert call("sk-full", "GET", f"/tasks/{task.json()['id']}").status_code == 404


def test_too_large_a_body_is_413(keyed):
    r = httpx.post(f"{keyed}/responses", json=request(text="x" * 5000), headers=auth("sk-full"))
    assert_problem(r, 413, "request_too_large")


@pytest.fixture(scope="module")
def cramped(sf_model_cache: Path, tmp_path_factory: pytest.TempPathFactory):
    """A server whose 2048 KV cells hold one window's worth, shared by two slots."""
    from jupyter_superfluid.pytest_plugin import start_standalone

    slow = f"{SLOW}={slow_model(sf_model_cache)}"
    workdir = tmp_path_factory.mktemp("cramped")
    server = start_standalone(sf_model_cache, workdir, *CRAMPED_ARGS, models=(slow,))
    yield server.url + "/lmsp/v1"
    server.stop()


def running(url: str) -> AbstractContextManager[None]:
    """An answer of 1500 tokens streaming, seen generating (``slow_model.generating``)."""
    body = long_request(1500, model=SLOW, stream=True, text=RUNNING_TEXT)
    return generating(f"{url}/responses", body)


def test_generation_failure_is_a_problem_not_a_response(cramped):
    # Beside a running answer, this prompt does not fit the cache (``TOO_LONG_BESIDE``).
    body = long_request(8, model=SLOW, text=TOO_LONG_BESIDE)
    with running(cramped):
        r = httpx.post(f"{cramped}/responses", json=body, timeout=120)
    doc = assert_problem(r, 500, "generation_failed")
    assert doc["detail"] == "KV cache full"
    # A task that fails the same way ends failed, with a problem in its final event.
    with running(cramped):
        created = httpx.post(f"{cramped}/tasks", json=body, timeout=30)
        assert created.status_code == 202
        task = wait_task(cramped, created.json()["id"])
    assert task["status"] == "failed"
    assert task["error"]["code"] == "generation_failed" and task["error"]["status"] == 500
    assert task["response"]["status"] == "failed"
    assert task["response"]["error"] == task["error"]
    events = httpx.get(f"{cramped}/tasks/{task['id']}/events", params={"after": 0}).text
    last = events.strip().split("\n\n")[-1].splitlines()
    assert last[1] == "event: response.failed"
    data = json.loads(last[2][len("data: ") :])
    assert data == {"response_id": task["response_id"], "status": "failed", "error": task["error"]}
    # Alone, the same request fits: what failed was the cache shared with the other answer.
    alone = httpx.post(f"{cramped}/responses", json=body, timeout=120)
    assert alone.status_code == 200, alone.text
    assert alone.json()["status"] == "incomplete"
    assert 2048 - 80 < alone.json()["usage"]["input_tokens"] <= 2048 - 8  # 80: the other prompt

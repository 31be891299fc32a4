"""LMSP tasks (7) and resumable events (6.4): replay, follow, cancel, retention, restarts."""

from __future__ import annotations

import re
import signal
import time

import httpx
import pytest
from support.engine_processes import settled_tokens, tokens_generated

from .helpers import (
    CHATML,
    FINAL,
    Event,
    assert_problem,
    events_of,
    iter_events,
    long_request,
    request,
    wait_task,
)

TASK_KEYS = {
    "id",
    "object",
    "status",
    "response_id",
    "created_at",
    "updated_at",
    "last_event_id",
    "response",
    "error",
    "links",
}


def create(url: str, body: dict) -> dict:
    r = httpx.post(f"{url}/tasks", json=body, timeout=60)
    assert r.status_code == 202, r.text
    return r.json()


def replay(url: str, task_id: str, **kw) -> list[Event]:
    r = httpx.get(f"{url}/tasks/{task_id}/events", timeout=60, **kw)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    return events_of(r.text)


def test_a_task_runs_and_keeps_its_events_and_final_response(url):
    body = request(max_output_tokens=30, seed=3)
    r = httpx.post(f"{url}/tasks", json={**body, "store": True}, timeout=60)
    assert r.status_code == 202 and r.headers["lmsp-version"] == "1.0"
    task = r.json()
    assert set(task) == TASK_KEYS and task["object"] == "task"
    assert re.fullmatch(r"task_[0-9a-f]{32}", task["id"])
    assert r.headers["location"].endswith(f"/lmsp/v1/tasks/{task['id']}")
    assert task["status"] in ("queued", "running") and task["response_id"].startswith("resp_")
    done = wait_task(url, task["id"])
    assert done["status"] == "incomplete" and done["error"] is None  # seed 3 runs to 30
    response = done["response"]
    assert response["id"] == task["response_id"] and response["status"] == done["status"]
    assert httpx.get(f"{url}/responses/{response['id']}").json() == response  # store: true
    events = replay(url, task["id"])
    assert [e.id for e in events] == list(range(1, done["last_event_id"] + 1))
    assert events[0].name == "response.created" and events[-1].name == f"response.{done['status']}"
    assert {e.data["response_id"] for e in events} == {task["response_id"]}
    assert events[-1].data["usage"] == response["usage"]
    text = "".join(e.data["delta"] for e in events if e.name == "response.output_text.delta")
    assert response["output"][0]["content"][0]["text"] == text
    # The same request as a stream gives the same events (one serializer).
    streamed = events_of(
        httpx.post(
            f"{url}/responses",
            json={**body, "stream": True},
            timeout=60,
        ).text
    )
    assert [(e.id, e.name) for e in streamed] == [(e.id, e.name) for e in events]


def test_resume_by_header_by_query_and_after_wins(url):
    task = create(url, long_request(20))
    last = wait_task(url, task["id"])["last_event_id"]
    assert last >= 6
    ids = lambda events: [e.id for e in events]  # noqa: E731
    assert ids(replay(url, task["id"])) == list(range(1, last + 1))
    assert ids(replay(url, task["id"], headers={"Last-Event-ID": "2"})) == list(range(3, last + 1))
    assert ids(replay(url, task["id"], params={"after": 4})) == list(range(5, last + 1))
    both = replay(url, task["id"], params={"after": 4}, headers={"Last-Event-ID": "1"})
    assert ids(both) == list(range(5, last + 1))
    both = replay(url, task["id"], params={"after": 1}, headers={"Last-Event-ID": "4"})
    assert ids(both) == list(range(2, last + 1))
    assert replay(url, task["id"], params={"after": last}) == []


def follow(url: str, task_id: str, until: str, **kw) -> list[Event]:
    """Read the task's events live up to the first named ``until``, then disconnect."""
    seen: list[Event] = []
    with httpx.stream("GET", f"{url}/tasks/{task_id}/events", timeout=60, **kw) as r:
        for event in iter_events(r):
            seen.append(event)
            if event.name == until:
                break
    return seen


def test_following_live_events_until_the_final_one(busy):
    url = busy.url + "/lmsp/v1"
    task = create(url, long_request(1500))
    events = follow(url, task["id"], until="never")  # returns when the server closes
    assert [e.id for e in events] == list(range(1, len(events) + 1))
    assert events[-1].name == "response.incomplete"
    assert events[-1].data["usage"]["output_tokens"] == 1500
    assert wait_task(url, task["id"])["last_event_id"] == len(events)


def test_a_task_survives_its_client_disconnecting(busy):
    url = busy.url + "/lmsp/v1"
    task = create(url, long_request(4000))
    seen = follow(url, task["id"], until="response.output_text.delta")
    assert httpx.get(f"{url}/tasks/{task['id']}").json()["status"] == "running"
    done = wait_task(url, task["id"])
    assert done["status"] == "incomplete"
    assert done["response"]["usage"]["output_tokens"] == 4000
    rest = replay(url, task["id"], headers={"Last-Event-ID": str(seen[-1].id)})
    assert [e.id for e in seen + rest] == list(range(1, done["last_event_id"] + 1))
    assert rest[-1].name == "response.incomplete"


def test_closing_a_stream_stops_its_generation(busy):
    url = busy.url + "/lmsp/v1"
    before = settled_tokens(busy.url, CHATML)
    body = long_request(4000, stream=True)
    with httpx.stream("POST", f"{url}/responses", json=body, timeout=60) as r:
        for event in iter_events(r):
            if event.name == "response.output_text.delta":
                break
    assert settled_tokens(busy.url, CHATML) - before - 8 < 4000  # it stopped before its end


def test_cancel_ends_a_task_with_response_cancelled(busy):
    url = busy.url + "/lmsp/v1"
    before = settled_tokens(busy.url, CHATML)
    task = create(url, long_request(4000))
    seen: list[Event] = []
    with httpx.stream("GET", f"{url}/tasks/{task['id']}/events", timeout=60) as r:
        for event in iter_events(r):
            seen.append(event)
            if event.name == "response.output_text.delta" and len(seen) == 3:
                cancelled = httpx.post(f"{url}/tasks/{task['id']}/cancel", timeout=30)
                assert cancelled.status_code == 200
                assert cancelled.json()["status"] == "cancelled"
    assert seen[-1].name == "response.cancelled"  # the stream closed after it
    assert seen[-1].data == {"response_id": task["response_id"], "status": "cancelled"}
    assert [e.id for e in seen] == list(range(1, len(seen) + 1))
    assert not any(e.name in FINAL for e in seen[:-1])
    assert settled_tokens(busy.url, CHATML) - before - 8 < 4000  # it stopped before its end
    again = httpx.post(f"{url}/tasks/{task['id']}/cancel").json()
    assert again["status"] == "cancelled" and again["last_event_id"] == seen[-1].id


def test_events_past_retention_are_410(sf_start_standalone):
    server = sf_start_standalone("--Superfluid.task_event_retention=1")
    url = server.url + "/lmsp/v1"
    task = create(url, request(max_output_tokens=5, seed=1))
    done = wait_task(url, task["id"])
    assert replay(url, task["id"])[0].id == 1
    time.sleep(1.3)
    r = httpx.get(f"{url}/tasks/{task['id']}/events")
    assert_problem(r, 410, "event_history_expired", "after")
    r = httpx.get(f"{url}/tasks/{task['id']}/events", headers={"Last-Event-ID": "2"})
    assert_problem(r, 410, "event_history_expired", "Last-Event-ID")
    # The client then fetches the final result instead.
    assert httpx.get(f"{url}/tasks/{task['id']}").json()["response"] == done["response"]


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_tasks_and_their_events_survive_a_restart(sf_start_standalone, tmp_path, sig):
    store = tmp_path / "store"
    first = sf_start_standalone(sessions_dir=store, context_size=4096)
    url = first.url + "/lmsp/v1"
    finished = create(url, request(max_output_tokens=10, seed=2))
    finished = wait_task(url, finished["id"])
    running = create(url, long_request(4000))
    seen = follow(url, running["id"], until="response.output_text.delta")
    assert tokens_generated(first.url, CHATML) < 4000  # still generating when the server goes
    first.stop(sig)
    second = sf_start_standalone(sessions_dir=store)
    url = second.url + "/lmsp/v1"
    assert httpx.get(f"{url}/tasks/{finished['id']}").json() == finished
    events = replay(url, finished["id"])
    assert [e.id for e in events] == list(range(1, finished["last_event_id"] + 1))
    # The interrupted task ended failed, with a problem, never stuck running.
    task = httpx.get(f"{url}/tasks/{running['id']}").json()
    assert task["status"] == "failed" and task["error"]["code"] == "server_restarted"
    rest = replay(url, running["id"], headers={"Last-Event-ID": str(seen[-1].id)})
    assert rest[0].id == seen[-1].id + 1 and rest[-1].name == "response.failed"
    assert rest[-1].data["error"] == task["error"]
    assert rest[-1].data["response_id"] == running["response_id"]

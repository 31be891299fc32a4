"""Idempotency-Key: replay, conflict, in progress, per principal, and across restarts."""

from __future__ import annotations

import signal
import uuid

import httpx

from .helpers import (
    assert_problem,
    auth,
    events_of,
    iter_events,
    long_request,
    request,
    wait_task,
)


def key() -> dict[str, str]:
    return {"Idempotency-Key": f"key-{uuid.uuid4().hex}"}


def post(url: str, path: str, body: dict, headers: dict[str, str]) -> httpx.Response:
    return httpx.post(f"{url}/{path}", json=body, headers=headers, timeout=60)


def test_same_key_and_body_replay_the_response_other_body_is_422(url):
    k, body = key(), request(max_output_tokens=8, seed=1)
    first = post(url, "responses", body, k)
    assert first.status_code == 200 and "idempotent-replayed" not in first.headers
    again = post(url, "responses", body, k)
    assert again.status_code == 200 and again.headers["idempotent-replayed"] == "true"
    assert again.json() == first.json()
    r = post(url, "responses", {**body, "temperature": 0.1}, k)
    assert_problem(r, 422, "idempotency_key_reused", "Idempotency-Key")
    # The same body on another route is another request too.
    assert_problem(post(url, "tasks", body, k), 422, "idempotency_key_reused", "Idempotency-Key")
    other = post(url, "responses", body, key())
    assert other.json()["id"] != first.json()["id"]


def test_a_replayed_stream_replays_its_events(url):
    k, body = key(), request(max_output_tokens=20, seed=2, stream=True)
    first = post(url, "responses", body, k)
    again = post(url, "responses", body, k)
    assert again.headers["idempotent-replayed"] == "true"
    assert again.headers["content-type"].startswith("text/event-stream")
    assert events_of(again.text) == events_of(first.text)
    assert events_of(first.text)[-1].name == "response.completed"  # seed 2 ends within 20


def test_a_replayed_task_is_the_same_task(url):
    k, body = key(), request(max_output_tokens=5, seed=2)
    first = post(url, "tasks", body, k)
    assert first.status_code == 202
    done = wait_task(url, first.json()["id"])
    again = post(url, "tasks", body, k)
    assert again.status_code == 202 and again.headers["idempotent-replayed"] == "true"
    assert again.json() == done


def test_keys_are_per_principal(keyed):
    k, body = key(), request(max_output_tokens=3)
    mine = post(keyed, "responses", body, {**k, **auth("sk-full")})
    theirs = post(keyed, "responses", body, {**k, **auth("sk-writer")})
    assert "idempotent-replayed" not in theirs.headers
    assert theirs.json()["id"] != mine.json()["id"]


def test_the_same_key_while_the_first_runs_is_409(busy):
    url = busy.url + "/lmsp/v1"
    k, body = key(), long_request(4000, stream=True)
    with httpx.stream("POST", f"{url}/responses", json=body, headers=k, timeout=60) as r:
        events = iter_events(r)
        seen = [next(events)]
        r2 = post(url, "responses", body, k)
        assert_problem(r2, 409, "idempotency_in_progress", "Idempotency-Key")
        r3 = post(url, "responses", request(), k)
        assert_problem(r3, 422, "idempotency_key_reused", "Idempotency-Key")
        seen += list(events)
    assert seen[-1].name == "response.incomplete"
    again = post(url, "responses", body, k)
    assert again.headers["idempotent-replayed"] == "true"
    assert events_of(again.text) == seen


def test_idempotency_survives_a_restart(sf_start_standalone, tmp_path):
    store = tmp_path / "store"
    first = sf_start_standalone(sessions_dir=store)
    url = first.url + "/lmsp/v1"
    sync, stream, task, cut = key(), key(), key(), key()
    body = request(max_output_tokens=8, seed=3)
    answers = {
        "sync": post(url, "responses", body, sync),
        "stream": post(url, "responses", {**body, "stream": True}, stream),
        "task": post(url, "tasks", body, task),
    }
    done = wait_task(url, answers["task"].json()["id"])
    # A request still running when the process dies holds its key no longer.
    long = long_request(2000, stream=True)
    with httpx.stream("POST", f"{url}/responses", json=long, headers=cut, timeout=60) as r:
        next(iter_events(r))
        first.stop(signal.SIGKILL)
    second = sf_start_standalone(sessions_dir=store)
    url = second.url + "/lmsp/v1"
    again = post(url, "responses", body, sync)
    assert again.headers["idempotent-replayed"] == "true" and again.json() == answers["sync"].json()
    again = post(url, "responses", {**body, "stream": True}, stream)
    assert again.headers["idempotent-replayed"] == "true"
    assert events_of(again.text) == events_of(answers["stream"].text)
    again = post(url, "tasks", body, task)
    assert again.headers["idempotent-replayed"] == "true" and again.json() == done
    r = post(url, "responses", request(), sync)
    assert_problem(r, 422, "idempotency_key_reused", "Idempotency-Key")
    rerun = post(url, "responses", long, cut)
    assert rerun.status_code == 200 and "idempotent-replayed" not in rerun.headers
    assert events_of(rerun.text)[-1].data["usage"]["output_tokens"] == 2000

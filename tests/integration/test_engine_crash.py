"""The engine process dies (SIGKILL, SIGSEGV) or stalls (SIGSTOP) under a real standalone server.

Every protocol's client sees the failure in its own shape with ``engine_crashed``,
nothing half-generated is stored, the supervisor restarts the engine and the next
request is answered; a continuation after the crash is the same turn, only cold.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from support.engine_processes import engine_children, is_running, wait_until
from support.no_eos import NO_EOS_WIRE, RUN_TO_CAP

from jupyter_superfluid.builtin_models.tiny_gguf import ensure_builtin
from jupyter_superfluid.store import STORE_FILE, Store

CHATML = "superfluid/tiny-chatml"
LONG = {"max_output_tokens": 1800, "extra_body": RUN_TO_CAP}


def client_for(server: Any) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0, timeout=120)


def model_status(server: Any, model: str = CHATML) -> dict[str, Any]:
    body = httpx.get(f"{server.base_url}/models/{model}", timeout=10).json()
    return dict(body["superfluid"])


def engine_pid(server: Any, model: str = CHATML) -> int:
    """The pid of ``model``'s engine process, once it runs."""
    wait_until(lambda: model_status(server, model).get("engine_pid"), f"{model}'s engine runs")
    pid = int(model_status(server, model)["engine_pid"])
    assert pid in engine_children(server.process.pid)  # a child of the server
    return pid


def stored_rows(server: Any) -> tuple[int, int]:
    """(sessions, responses) in the server's store."""
    uri = f"file:{server.sessions_dir / STORE_FILE}?mode=ro"
    with sqlite3.connect(uri, uri=True) as db:
        sessions = db.execute("SELECT count(*) FROM sessions").fetchone()[0]
        responses = db.execute("SELECT count(*) FROM responses").fetchone()[0]
    return int(sessions), int(responses)


def assert_back(server: Any, dead: int) -> None:
    """The old engine process is gone, a new one serves the next request."""
    out = client_for(server).responses.create(
        model=CHATML, input="again", max_output_tokens=4, extra_body=RUN_TO_CAP
    )
    assert out.status == "incomplete" and out.usage.output_tokens == 4
    status = model_status(server)
    assert status["engine_restarts"] == 1 and status["engine_pid"] != dead
    assert not is_running(dead)


def signalled_stream(server: Any, pid: int, sig: int) -> list[tuple[str, dict[str, Any]]]:
    """The events of a long Responses stream whose engine gets ``sig`` at its 8th event."""
    body = {"model": CHATML, "input": "go", "stream": True, "max_output_tokens": 1800}
    events: list[tuple[str, dict[str, Any]]] = []
    with httpx.stream(
        "POST", server.base_url + "/responses", json={**body, **RUN_TO_CAP}, timeout=120
    ) as r:
        for name, data in sse_events(r):
            events.append((name, data))
            if name == "response.output_text.delta" and len(events) == 8:
                os.kill(pid, sig)
    return events


def test_a_responses_stream_ends_failed_and_nothing_is_stored(sf_start_standalone: Any) -> None:
    server = sf_start_standalone()
    pid = engine_pid(server)
    before = stored_rows(server)
    events = signalled_stream(server, pid, signal.SIGKILL)
    names = [name for name, _ in events]
    assert names[0] == "response.created" and names[-2:] == ["error", "response.failed"]
    error, failed = events[-2][1], events[-1][1]
    # OpenAI's top-level fields and OpenResponses' error payload say the same.
    assert error["code"] == error["error"]["code"] == "engine_crashed"
    assert f"(pid {pid}) was killed by SIGKILL" in error["message"]
    assert failed["response"]["status"] == "failed"
    assert failed["response"]["error"]["code"] == "engine_crashed"
    assert stored_rows(server) == before  # no session, no response
    with pytest.raises(openai.NotFoundError):
        client_for(server).responses.retrieve(failed["response"]["id"])
    assert_back(server, pid)


def test_a_stopped_engine_is_killed_and_its_responses_stream_ends_failed(
    sf_start_standalone: Any,
) -> None:
    server = sf_start_standalone("--engine-stall-timeout=3")
    pid = engine_pid(server)
    before = stored_rows(server)
    events = signalled_stream(server, pid, signal.SIGSTOP)  # alive, but it makes no progress
    names = [name for name, _ in events]
    assert names[0] == "response.created" and names[-2:] == ["error", "response.failed"]
    error, failed = events[-2][1], events[-1][1]
    assert error["code"] == error["error"]["code"] == "engine_crashed"
    assert f"(pid {pid}) stopped making progress for " in error["message"]
    assert "(it sent nothing: stopped or frozen) and was killed; its last log" in error["message"]
    assert failed["response"]["status"] == "failed"
    assert failed["response"]["error"]["code"] == "engine_crashed"
    assert stored_rows(server) == before
    assert f"(pid {pid}) stopped making progress" in server.log()  # logged, with the restart
    assert_back(server, pid)
    assert model_status(server)["engine_stalls"] == 1


def test_the_openai_sdk_raises_the_crash_of_a_responses_stream(sf_start_standalone: Any) -> None:
    server = sf_start_standalone()
    pid = engine_pid(server)
    stream = client_for(server).responses.create(model=CHATML, input="go", stream=True, **LONG)
    seen = []
    with pytest.raises(openai.APIError) as info:
        for event in stream:
            seen.append(event.type)
            if event.type == "response.output_text.delta" and len(seen) == 8:
                os.kill(pid, signal.SIGKILL)
    assert seen[0] == "response.created" and len(seen) >= 8
    assert info.value.code == "engine_crashed" and "SIGKILL" in info.value.message
    assert_back(server, pid)


def test_a_chat_completions_stream_raises_api_error(sf_start_standalone: Any) -> None:
    server = sf_start_standalone()
    pid = engine_pid(server)
    before = stored_rows(server)
    stream = client_for(server).chat.completions.create(
        model=CHATML,
        messages=[{"role": "user", "content": "go"}],
        stream=True,
        max_tokens=1800,
        seed=0,
        logit_bias=NO_EOS_WIRE,
    )
    chunks = 0
    with pytest.raises(openai.APIError) as info:
        for _ in stream:
            chunks += 1
            if chunks == 5:
                os.kill(pid, signal.SIGSEGV)
    assert chunks >= 5 and info.value.code == "engine_crashed"
    assert f"(pid {pid}) was killed by SIGSEGV" in info.value.message
    assert "Fatal Python error: Segmentation fault" in info.value.message  # its last log lines
    assert stored_rows(server) == before
    assert_back(server, pid)


def test_a_request_without_stream_gets_503_engine_crashed(sf_start_standalone: Any) -> None:
    server = sf_start_standalone()
    pid = engine_pid(server)
    failure: list[BaseException] = []

    def create() -> None:
        try:
            client_for(server).responses.create(model=CHATML, input="go", **LONG)
        except openai.APIStatusError as err:
            failure.append(err)

    worker = threading.Thread(target=create)
    generated = model_status(server)["tokens_generated"]
    worker.start()
    wait_until(lambda: model_status(server)["tokens_generated"] > generated, "tokens generate")
    os.kill(pid, signal.SIGKILL)
    worker.join()
    (err,) = failure
    assert isinstance(err, openai.APIStatusError) and err.status_code == 503
    assert err.code == "engine_crashed" and "SIGKILL" in err.message
    assert_back(server, pid)


def sse_events(response: httpx.Response) -> Iterator[tuple[str, dict[str, Any]]]:
    """(name, data) of every event of a stream (either protocol), as it arrives."""
    name = ""
    for line in response.iter_lines():
        if line.startswith("event: "):
            name = line[7:]
        elif line.startswith("data: {"):  # not the closing [DONE] of a Responses stream
            yield name, json.loads(line[6:])


def test_lmsp_streams_and_tasks_end_failed(sf_start_standalone: Any) -> None:
    server = sf_start_standalone()
    url = server.url + "/lmsp/v1"
    body = {
        "model": CHATML,
        "input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]}
        ],
        "max_output_tokens": 1800,
        "stream": True,
        "extensions": {"superfluid": {"logit_bias": NO_EOS_WIRE, "seed": 1}},
    }
    pid = engine_pid(server)
    before = stored_rows(server)
    seen: list[tuple[str, dict[str, Any]]] = []
    with httpx.stream("POST", url + "/responses", json=body, timeout=120) as r:
        assert r.status_code == 200, r.read()
        for event in sse_events(r):
            seen.append(event)
            deltas = sum(name == "response.output_text.delta" for name, _ in seen)
            if deltas == 3 and event[0] == "response.output_text.delta":
                os.kill(pid, signal.SIGKILL)  # once: the third delta
    name, final = seen[-1]
    assert seen[0][0] == "response.created" and name == "response.failed"
    assert final["error"]["code"] == "engine_crashed" and final["error"]["status"] == 503
    assert f"(pid {pid}) was killed by SIGKILL" in final["error"]["detail"]
    assert stored_rows(server) == before
    # A task the crash ends is failed, with the same code, and stores no response.
    pid = engine_pid(server)
    task = httpx.post(url + "/tasks", json={**body, "stream": False}, timeout=30).json()
    wait_until(
        lambda: (
            httpx.get(f"{url}/tasks/{task['id']}", timeout=10).json()["status"] == "running"
            and model_status(server)["tokens_generated"] > 0
        ),
        "the task generates",
    )
    os.kill(pid, signal.SIGSEGV)
    wait_until(
        lambda: httpx.get(f"{url}/tasks/{task['id']}", timeout=10).json()["status"] != "running",
        "the task ends",
    )
    done = httpx.get(f"{url}/tasks/{task['id']}", timeout=10).json()
    assert done["status"] == "failed" and done["error"]["code"] == "engine_crashed"
    assert "SIGSEGV" in done["error"]["detail"]
    assert httpx.get(f"{url}/responses/{task['response_id']}").status_code == 404
    assert stored_rows(server) == before


def test_a_continuation_after_a_crash_is_the_same_turn_cold(sf_start_standalone: Any) -> None:
    # No disk tier: the crash takes all KV state (test_warm_restart.py has it back).
    server = sf_start_standalone("--cache-disk=0")
    client = client_for(server)
    first = None
    for seed in range(40):  # a turn that ended on its own can be continued warm
        first = client.responses.create(
            model=CHATML, input="Hi", max_output_tokens=60, extra_body={"seed": seed}
        )
        if first.status == "completed":
            break
    assert first is not None and first.status == "completed"
    turn: dict[str, Any] = {
        "previous_response_id": first.id,
        "input": "Again",
        "max_output_tokens": 20,
        "extra_body": {"seed": 7},
    }
    warm = client.responses.create(**turn)
    pid = engine_pid(server)
    os.kill(pid, signal.SIGKILL)
    cold = client.responses.create(**turn)  # waits for the restart
    assert warm.usage.input_tokens_details.cached_tokens > 0
    assert cold.usage.input_tokens_details.cached_tokens == 0
    assert cold.usage.input_tokens == warm.usage.input_tokens
    assert cold.output_text == warm.output_text
    store = Store(server.sessions_dir, readonly=True)
    try:
        for r in (warm, cold):  # both forked from the stored conversation
            rec = store.get_response(r.id)
            assert rec is not None
            info = store.get_session(rec.session_id)
            assert info is not None and info.meta["forked"] is True
    finally:
        store.close()
    assert client.responses.retrieve(first.id).output_text == first.output_text
    assert model_status(server)["engine_restarts"] == 1


def test_a_crash_while_loading_is_a_load_failure(sf_start_standalone: Any) -> None:
    server = sf_start_standalone()
    failure: list[BaseException] = []
    qwen = "superfluid/tiny-qwen3"  # not preloaded: it loads on the first request

    def create() -> None:
        try:
            client_for(server).responses.create(model=qwen, input="x", max_output_tokens=2)
        except openai.APIStatusError as err:
            failure.append(err)

    engine_pid(server)  # the preloaded model's engine
    known = set(engine_children(server.process.pid))
    worker = threading.Thread(target=create)
    worker.start()
    loading: list[int] = []
    wait_until(
        lambda: loading.extend(set(engine_children(server.process.pid)) - known) or loading,
        "the engine process for the second model starts",
    )
    (pid,) = loading
    # Stopped at once (it needs far longer to import llama.cpp and load), then killed.
    os.kill(pid, signal.SIGSTOP)
    assert model_status(server, qwen)["loaded"] is False, "it loaded before it could be stopped"
    os.kill(pid, signal.SIGKILL)
    worker.join()
    (err,) = failure
    assert isinstance(err, openai.APIStatusError) and err.status_code == 503
    assert err.code == "model_load_failed"
    assert f"(pid {pid}) was killed by SIGKILL while loading" in err.message
    assert httpx.get(server.url + "/v1/models", timeout=10).status_code == 200
    # The next request loads the model again and is answered.
    out = client_for(server).responses.create(
        model=qwen, input="x", max_output_tokens=2, extra_body=RUN_TO_CAP
    )
    assert out.status == "incomplete" and out.usage.output_tokens == 2


def test_a_failed_restart_answers_503_at_once_then_recovers(
    sf_start_standalone: Any, tmp_path: Path
) -> None:
    model = tmp_path / "m.gguf"
    shutil.copy(ensure_builtin(CHATML, tmp_path / "cache"), model)
    server = sf_start_standalone(models=(f"m={model}",))
    client = client_for(server)
    assert client.responses.create(model="m", input="x", max_output_tokens=2).status
    pid = engine_pid(server, "m")
    good = model.read_bytes()
    model.write_text("not a model any more")
    os.kill(pid, signal.SIGKILL)
    with pytest.raises(openai.APIStatusError) as info:
        client.responses.create(model="m", input="x", max_output_tokens=2)
    assert info.value.status_code == 503 and info.value.code == "engine_unavailable"
    assert "not a GGUF" in info.value.message  # why the restart failed
    model.write_bytes(good)
    wait_until(lambda: model_status(server, "m")["engine_state"] == "ready", "the engine is back")
    assert client.responses.create(model="m", input="x", max_output_tokens=2).status


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_the_engine_process_never_outlives_the_server(
    sf_start_standalone: Any, sig: signal.Signals
) -> None:
    server = sf_start_standalone()
    pid = engine_pid(server)
    server.stop(sig)
    wait_until(lambda: not is_running(pid), f"the engine process ends after {sig.name}")
    if sig == signal.SIGTERM:
        assert "closed superfluid/tiny-chatml" in server.log()  # a clean close, not a kill


def test_a_generation_waiting_for_a_slot_still_opens_then_fails(sf_start_standalone: Any) -> None:
    # One slot: while a stream holds it, a task's generation waits in the engine, unstarted.
    server = sf_start_standalone("--cache-slots=1")
    url = server.url + "/lmsp/v1"
    pid = engine_pid(server)
    first: list[str] = []
    started = threading.Event()
    long = {"model": CHATML, "input": "go", "stream": True, "max_output_tokens": 1800}

    def drain() -> None:
        with httpx.stream(
            "POST",
            server.base_url + "/responses",
            json={**long, **RUN_TO_CAP},
            timeout=120,
        ) as r:
            for name, _ in sse_events(r):
                first.append(name)
                started.set()

    reader = threading.Thread(target=drain)
    reader.start()
    started.wait(60)
    body = {
        "model": CHATML,
        "input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "b"}]}
        ],
        "max_output_tokens": 50,
    }
    task = httpx.post(url + "/tasks", json=body, timeout=30).json()
    status = lambda: httpx.get(f"{url}/tasks/{task['id']}", timeout=10).json()["status"]  # noqa: E731
    wait_until(lambda: status() == "running", "the task runs")
    generated = model_status(server)["tokens_generated"]
    os.kill(pid, signal.SIGKILL)
    reader.join()
    wait_until(lambda: status() == "failed", "the task fails")
    with httpx.stream("GET", f"{url}/tasks/{task['id']}/events", timeout=30) as r:
        events = [name for name, _ in sse_events(r)]
    assert events == ["response.created", "response.failed"]  # opened, though never started
    assert first[-2:] == ["error", "response.failed"]
    assert generated > 0

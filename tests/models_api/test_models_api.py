"""``/superfluid/v1/models…`` on a real standalone server, downloading from a hub on loopback.

The server runs with its engines in engine processes (the default), ``HF_ENDPOINT``
at the local hub and an empty Hugging Face home. The hub holds a download midway when
a test needs to look at it midway, so nothing here races a download.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from support.hub_server import CHATML, REPO, hub_files, hub_serving, serve_with_hub
from support.local_hub import LocalHub

from jupyter_superfluid.pytest_plugin import StandaloneServer

from .sse import Event, events

API = "/superfluid/v1/models"


FILES = ["pulled", "removed", "restarted", "killed"]


@pytest.fixture(scope="module")
def gguf(sf_model_cache: Path) -> dict[str, bytes]:
    """Real GGUF files' bytes (the tiny built-in models), by hub file name."""
    return hub_files(sf_model_cache, FILES)


@pytest.fixture(scope="module")
def hub(gguf: dict[str, bytes]) -> Iterator[LocalHub]:
    """The hub on loopback, with a few files."""
    with hub_serving({**gguf, "page": b"<!DOCTYPE html><p>sign in</p>" * 40}) as hub:
        yield hub


@pytest.fixture(scope="module")
def server(
    hub: LocalHub, sf_model_cache: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[StandaloneServer]:
    """One server for the tests that do not restart it."""
    server = serve_with_hub(hub, sf_model_cache, tmp_path_factory.mktemp("models-api"))
    yield server
    server.stop()


def api(server: StandaloneServer, method: str, path: str = "", **kw: object) -> httpx.Response:
    """One call of the models API."""
    return httpx.request(method, f"{server.url}{API}{path}", timeout=60, **kw)  # type: ignore[arg-type]


def ask(server: StandaloneServer, model: str, protocol: str = "responses") -> httpx.Response:
    """One small request for ``model`` through a protocol."""
    if protocol == "responses":
        body = {"model": model, "input": "hi", "max_output_tokens": 2}
        return httpx.post(f"{server.base_url}/responses", json=body, timeout=120)
    if protocol == "chat":
        body = {"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
        return httpx.post(f"{server.base_url}/chat/completions", json=body, timeout=120)
    message = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}
    body = {"model": model, "input": [message], "max_output_tokens": 2}
    return httpx.post(f"{server.url}/lmsp/v1/responses", json=body, timeout=120)


def test_the_listing_shows_every_model_and_the_last_event_id(server: StandaloneServer) -> None:
    listing = api(server, "GET").json()
    assert listing["object"] == "list" and isinstance(listing["last_event_id"], int)
    chatml = next(m for m in listing["data"] if m["id"] == CHATML)
    assert chatml["object"] == "superfluid.model" and chatml["state"] == "available"
    assert chatml["origin"] == "config" and chatml["kind"] == "builtin"
    assert api(server, "GET", f"/{CHATML}").json()["id"] == CHATML
    missing = api(server, "GET", "/nope")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "model_not_found"


def test_a_pull_streams_its_progress_and_requests_meanwhile_get_503(
    server: StandaloneServer, hub: LocalHub, gguf: dict[str, bytes]
) -> None:
    half = len(gguf["pulled"]) // 2
    hub.pause_at(half)
    with events(server.url) as stream:
        first = stream.next()
        assert first.event == "models.snapshot" and first.id == first.data["last_event_id"]
        assert CHATML in [m["id"] for m in first.data["data"]]
        made = api(server, "POST", json={"spec": f"hf:{REPO}/pulled.gguf"})
        assert made.status_code == 201 and made.json()["state"] == "downloading"
        hub.wait_reached()
        held = stream.until(
            lambda e: (
                e.event == "model.progress" and e.data["model"]["progress"]["done_bytes"] == half
            )
        )
        assert held.data["model"]["progress"]["total_bytes"] == len(gguf["pulled"])
        for protocol in ("responses", "chat", "lmsp"):
            busy = ask(server, "pulled", protocol)
            assert busy.status_code == 503, (protocol, busy.text)
            assert busy.headers["Retry-After"] == "5"
            body = busy.json()
            code = body["code"] if protocol == "lmsp" else body["error"]["code"]
            text = body["detail"] if protocol == "lmsp" else body["error"]["message"]
            assert code == "model_loading" and "is downloading: 50% (" in text
        described = httpx.get(f"{server.base_url}/models/pulled").json()["superfluid"]
        assert described["state"] == "downloading"
        assert described["progress"]["done_bytes"] == half
        lmsp = httpx.get(f"{server.url}/lmsp/v1/models/pulled").json()
        assert lmsp["state"] == "downloading" and lmsp["progress"]["fraction"] == 0.5
        hub.release()
        done = stream.until_state("pulled", "available", "failed")
        assert done.data["model"]["state"] == "available", done.data
        loading = api(server, "POST", "/pulled/load")
        assert loading.status_code in (200, 202)
        stream.until_state("pulled", "loaded")
    ids = [e.id for e in stream.seen if e.id is not None]
    assert ids == sorted(set(ids))  # increasing, never repeated
    mine = [
        e for e in stream.seen if e.event.startswith("model.") and e.data["model"]["id"] == "pulled"
    ]
    assert mine[0].event == "model.added"
    done_bytes = [
        e.data["model"]["progress"]["done_bytes"] for e in mine if e.event == "model.progress"
    ]
    assert done_bytes == sorted(done_bytes)
    assert ask(server, "pulled").status_code == 200


def test_a_follower_resumes_after_its_last_event_id(server: StandaloneServer) -> None:
    with events(server.url) as stream:
        start = stream.next().id
        api(server, "POST", f"/{CHATML}/unload")  # whether it was loaded or not
        assert api(server, "POST", f"/{CHATML}/load").status_code == 202
        stream.until_state(CHATML, "loaded")
    seen = [e for e in stream.seen if e.event.startswith("model.")]
    assert [e.data["model"]["state"] for e in seen][-2:] == ["loading", "loaded"]
    with events(server.url, {"Last-Event-ID": str(seen[0].id)}) as again:
        resumed = again.next()
    assert resumed.id == seen[1].id and resumed.event == seen[1].event  # no snapshot
    with events(server.url, after=str(start)) as by_query:
        assert by_query.next().id == seen[0].id
    with events(server.url, {"Last-Event-ID": "5"}) as stale:  # another server's id
        assert stale.next().event == "models.snapshot"
    with events(server.url, model=CHATML) as one:
        snap = one.next()
        assert [m["id"] for m in snap.data["data"]] == [CHATML]
    bad = httpx.get(f"{server.url}{API}/events", headers={"Last-Event-ID": "x"}, timeout=30)
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "Last-Event-ID"
    bad = httpx.get(f"{server.url}{API}/events", params={"after": "-1"}, timeout=30)
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "after"


def test_unloading_ends_the_engine_process(server: StandaloneServer) -> None:
    with events(server.url, model=CHATML) as stream:
        stream.next()
        if api(server, "POST", f"/{CHATML}/load").json()["state"] != "loaded":
            stream.until_state(CHATML, "loaded")
    pid = httpx.get(f"{server.base_url}/models/{CHATML}").json()["superfluid"]["engine_pid"]
    assert isinstance(pid, int) and _alive(pid)
    unloaded = api(server, "POST", f"/{CHATML}/unload")
    assert unloaded.status_code == 200 and unloaded.json()["state"] == "unloaded"
    deadline = time.monotonic() + 60
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(pid)  # the model's memory went with its process
    status = httpx.get(f"{server.base_url}/models/{CHATML}").json()["superfluid"]
    assert status["loaded"] is False and status["state"] == "unloaded"


def test_removing_a_model_and_its_files(server: StandaloneServer, hub: LocalHub) -> None:
    with events(server.url, model="removed") as stream:
        stream.next()
        assert api(server, "POST", json={"spec": f"hf:{REPO}/removed.gguf"}).status_code == 201
        stream.until_state("removed", "available")
        gone = api(server, "DELETE", "/removed", params={"delete_files": "true"})
        assert gone.status_code == 200
        assert gone.json() == {
            "id": "removed",
            "object": "superfluid.model.deleted",
            "deleted": True,
            "files_deleted": True,
        }
        assert stream.until(lambda e: e.event == "model.removed").data["model"]["id"] == "removed"
    assert api(server, "GET", "/removed").status_code == 404
    assert "removed" not in [m["id"] for m in httpx.get(f"{server.base_url}/models").json()["data"]]
    after = ask(server, "removed")
    assert after.status_code == 400 and after.json()["error"]["code"] == "model_not_found"
    blobs = Path(server.log_path).parent / "hf-home" / "hub" / f"models--{REPO.replace('/', '--')}"
    assert not list(blobs.glob("snapshots/*/removed.gguf"))
    assert api(server, "DELETE", "/removed").status_code == 404


def test_bad_requests_name_what_is_wrong(server: StandaloneServer) -> None:
    cases = [
        ({}, "spec"),
        ({"spec": 5}, "spec"),
        ({"spec": "not a model"}, "spec"),
        ({"spec": "hf:just-a-repo"}, "spec"),
        ({"spec": CHATML, "lod": True}, "lod"),
        ({"spec": CHATML, "load": "yes"}, "load"),
    ]
    for body, param in cases:
        r = api(server, "POST", json=body)
        assert r.status_code == 400, (body, r.text)
        assert r.json()["error"]["param"] == param, (body, r.json())
    conflict = api(server, "POST", json={"spec": f"{CHATML}=superfluid/tiny-qwen3"})
    assert conflict.status_code == 409 and conflict.json()["error"]["code"] == "model_exists"
    again = api(server, "POST", json={"spec": CHATML})
    assert again.status_code == 200 and again.json()["id"] == CHATML
    bad_flag = api(server, "DELETE", f"/{CHATML}", params={"delete_files": "perhaps"})
    assert bad_flag.status_code == 400 and bad_flag.json()["error"]["param"] == "delete_files"


def test_failed_downloads_end_failed_with_the_reason(server: StandaloneServer) -> None:
    with events(server.url) as stream:
        stream.next()
        for spec in (f"hf:{REPO}/missing.gguf", f"hf:{REPO}/page.gguf"):
            assert api(server, "POST", json={"spec": spec}).status_code == 201
        missing = stream.until_state("missing", "failed").data["model"]
        page = stream.until_state("page", "failed").data["model"]
    assert "has no file missing.gguf (HTTP 404)" in missing["error"]
    assert "not a GGUF model file" in page["error"]
    r = ask(server, "page")
    assert r.status_code == 503 and r.json()["error"]["code"] == "model_unavailable"


def test_run_time_models_outlive_a_restart_and_a_killed_download_resumes(
    hub: LocalHub, gguf: dict[str, bytes], sf_model_cache: Path, tmp_path: Path
) -> None:
    home, store = tmp_path / "hf-home", tmp_path / "store"
    first = serve_with_hub(hub, sf_model_cache, tmp_path / "a", home=home, sessions_dir=store)
    try:
        assert api(first, "POST", json={"spec": f"hf:{REPO}/restarted.gguf"}).status_code == 201
        with events(first.url, model="restarted") as stream:
            stream.until_state("restarted", "available")
        assert api(first, "DELETE", f"/{CHATML}").status_code == 200
        half = len(gguf["killed"]) // 2
        hub.pause_at(half)
        assert api(first, "POST", json={"spec": f"hf:{REPO}/killed.gguf"}).status_code == 201
        hub.wait_reached()
        with events(first.url, model="killed") as stream:
            stream.until(
                lambda e: (
                    e.event == "model.progress"
                    and e.data["model"]["progress"]["done_bytes"] == half
                )
            )
    finally:
        first.stop(signal.SIGKILL)  # no clean shutdown: the partial file is all that is left
    hub.release()
    gets_before = len(hub.gets())
    second = serve_with_hub(hub, sf_model_cache, tmp_path / "b", home=home, sessions_dir=store)
    try:
        with events(second.url) as stream:
            snap = stream.next().data["data"]
            served = {m["id"]: m for m in snap}
            assert CHATML not in served  # removed stays removed
            assert served["restarted"]["origin"] == "added"
            assert served["restarted"]["state"] == "available"
            assert served["killed"]["origin"] == "added"
            if served["killed"]["state"] != "available":  # it resumes as the server starts
                stream.until_state("killed", "available")
    finally:
        second.stop()
    resumed = hub.gets(hub.etag(REPO, "killed.gguf"))[-1]
    assert len(hub.gets()) == gets_before + 1 and resumed.ranged and resumed.start == half


def _done(event: Event) -> int | None:
    """The bytes a progress event says are downloaded (None for other events)."""
    if event.event != "model.progress":
        return None
    return int(event.data["model"]["progress"]["done_bytes"])


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is gone too: its memory is freed
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False

"""The model lifecycle: states, events, downloads, loads, unloads, removal, persistence.

Real parts only: the tiny built-in GGUF models through real llama-cpp-python, real
downloads through huggingface_hub from the hub on loopback (``tests/support/local_hub.py``),
and the real SQLite store.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest
from support.local_hub import LocalHub

from jupyter_superfluid.errors import ModelLoading, ModelUnavailable
from jupyter_superfluid.models.hub import ModelHub
from jupyter_superfluid.models.hub_cache import HubFile, cached_file, partial_bytes
from jupyter_superfluid.models.lifecycle import (
    ModelConflict,
    ModelFailed,
    ModelLifecycle,
    ModelNotReady,
)
from jupyter_superfluid.models.registry import ModelRegistry
from jupyter_superfluid.models.served_set import served_specs
from jupyter_superfluid.models.states import EventLog, ModelEvent, ModelState
from jupyter_superfluid.store import Store

CHATML = "superfluid/tiny-chatml"
QWEN = "superfluid/tiny-qwen3"
REPO = "sf-test/tiny-GGUF"


@pytest.fixture
def gguf_bytes(sf_model_cache: Path) -> bytes:
    """A real GGUF file's bytes (the tiny Qwen3-style model)."""
    return next(sf_model_cache.glob("tiny-qwen3*.gguf")).read_bytes()


def lifecycle_of(
    specs: list[str], cache: Path, *, store: Store | None = None, wait: float = 30.0
) -> ModelLifecycle:
    """A lifecycle over ``specs`` with quick download retries."""
    registry = ModelRegistry(specs, cache_dir=cache, context_size=256)
    return ModelLifecycle(
        registry, store=store, model_wait=wait, download_retries=1, download_backoff_s=0.05
    )


async def until(lifecycle: ModelLifecycle, check: Callable[[], bool], timeout: float = 60) -> None:
    """Wait for events until ``check()`` holds."""
    deadline = asyncio.get_running_loop().time() + timeout
    seen = lifecycle.events.last_id
    while not check():
        left = deadline - asyncio.get_running_loop().time()
        if left <= 0:
            raise TimeoutError(f"still {[s.state for s in lifecycle.states()]}")
        await lifecycle.events.wait(seen, left)
        seen = lifecycle.events.last_id


def done_bytes(lifecycle: ModelLifecycle, model_id: str) -> int:
    """Bytes of the model downloaded so far, as its state says."""
    progress = lifecycle.state(model_id).progress
    return 0 if progress is None else progress.done


def events_of(lifecycle: ModelLifecycle, model_id: str) -> list[ModelEvent]:
    """Every kept event about one model, in order."""
    return [e for e in lifecycle.events.kept() if e.model["id"] == model_id]


def states_of(lifecycle: ModelLifecycle, model_id: str) -> list[str]:
    """The states one model went through, each once in a row."""
    out: list[str] = []
    for event in events_of(lifecycle, model_id):
        if not out or out[-1] != event.model["state"]:
            out.append(event.model["state"])
    return out


def test_a_built_in_model_loads_unloads_and_loads_again(sf_model_cache: Path) -> None:
    lifecycle = lifecycle_of([CHATML, QWEN], sf_model_cache)
    assert [s.state for s in lifecycle.states()] == ["available", "available"]

    async def scenario() -> None:
        first = await lifecycle.ready(CHATML)
        assert first.engine.info.id == CHATML and lifecycle.loaded(CHATML) is first
        assert (await lifecycle.ready(CHATML)) is first  # once
        assert (await lifecycle.unload(CHATML)).state == "unloaded"
        assert lifecycle.loaded(CHATML) is None
        second = await lifecycle.ready(CHATML)
        assert second is not first and second.engine.info.id == CHATML
        await lifecycle.close()

    asyncio.run(scenario())
    assert states_of(lifecycle, CHATML) == ["loading", "loaded", "unloaded", "loading", "loaded"]
    ids = [e.id for e in lifecycle.events.kept()]
    start = lifecycle.events.start
    assert ids == list(range(start + 1, start + len(ids) + 1))  # numbered, no gaps
    assert states_of(lifecycle, QWEN) == []


def test_a_pulled_model_downloads_with_progress_then_loads(
    sf_model_cache: Path, hub_env: Path, local_hub: LocalHub, gguf_bytes: bytes
) -> None:
    spec = local_hub.add(REPO, "tiny.gguf", gguf_bytes)
    local_hub.state.rate = 4_000_000
    lifecycle = lifecycle_of([CHATML], sf_model_cache)

    async def scenario() -> None:
        state, created = await lifecycle.add(spec)
        assert created and state.id == "tiny" and state.origin == "added"
        await until(lifecycle, lambda: lifecycle.state("tiny").state == "available")
        again, created = await lifecycle.add(spec)
        assert not created and again.state == "available"
        assert (await lifecycle.ready("tiny")).engine.info.id == "tiny"
        await lifecycle.close()

    asyncio.run(scenario())
    assert states_of(lifecycle, "tiny") == [
        "not_downloaded",
        "downloading",
        "available",
        "loading",
        "loaded",
    ]
    events = events_of(lifecycle, "tiny")
    assert events[0].type == "model.added"
    progress = [e.model["progress"] for e in events if e.type == "model.progress"]
    done = [p["done_bytes"] for p in progress]
    assert len(done) > 1 and done == sorted(done)
    assert {p["total_bytes"] for p in progress} == {len(gguf_bytes)}
    available = next(e for e in events if e.model["state"] == "available")
    assert available.model["progress"]["fraction"] == 1.0


def test_a_request_during_a_download_gets_model_loading_with_the_progress(
    sf_model_cache: Path, hub_env: Path, local_hub: LocalHub, gguf_bytes: bytes
) -> None:
    spec = local_hub.add(REPO, "tiny.gguf", gguf_bytes)
    local_hub.pause_at(len(gguf_bytes) // 2)
    lifecycle = lifecycle_of([spec, CHATML], sf_model_cache, wait=0)
    hub = ModelHub(lifecycle)
    assert lifecycle.state("tiny").state == "not_downloaded"

    async def scenario() -> None:
        with pytest.raises(ModelNotReady) as first:
            await lifecycle.ready("tiny")  # starts the download, answers at once
        assert first.value.state.state == "downloading"
        await asyncio.to_thread(local_hub.wait_reached)
        await until(lifecycle, lambda: done_bytes(lifecycle, "tiny") > 0)
        with pytest.raises(ModelLoading) as err:
            await hub.get("tiny")
        assert err.value.status == 503 and err.value.code == "model_loading"
        assert err.value.retry_after == 5
        assert "is downloading: " in err.value.message and "% (" in err.value.message
        assert hub.status("tiny")["state"] == "downloading"
        local_hub.release()
        await until(lifecycle, lambda: lifecycle.state("tiny").state == "loaded")
        assert (await hub.get("tiny")).id == "tiny"
        await lifecycle.close()

    asyncio.run(scenario())
    assert len(local_hub.gets()) == 1  # the second request joined the first download


def test_unloading_a_download_stops_it_and_loading_resumes_it(
    sf_model_cache: Path, hub_env: Path, local_hub: LocalHub, gguf_bytes: bytes
) -> None:
    spec = local_hub.add(REPO, "tiny.gguf", gguf_bytes)
    half = len(gguf_bytes) // 2
    local_hub.pause_at(half)
    lifecycle = lifecycle_of([CHATML], sf_model_cache)
    file = HubFile(REPO, "tiny.gguf")

    async def scenario() -> None:
        await lifecycle.add(spec)
        await asyncio.to_thread(local_hub.wait_reached)
        await until(lifecycle, lambda: partial_bytes(file) == half)
        stopped = await lifecycle.unload("tiny")
        assert stopped.state == "not_downloaded"
        local_hub.release()
        await lifecycle.load("tiny")
        await until(lifecycle, lambda: lifecycle.state("tiny").state == "loaded")
        await lifecycle.close()

    asyncio.run(scenario())
    last = local_hub.gets()[-1]
    assert last.ranged and last.start == half
    assert states_of(lifecycle, "tiny")[-5:] == [
        "not_downloaded",
        "downloading",
        "available",
        "loading",
        "loaded",
    ]


def test_failed_downloads_say_why_and_answer_model_unavailable(
    sf_model_cache: Path, hub_env: Path, local_hub: LocalHub
) -> None:
    local_hub.add(REPO, "page.gguf", b"<html>not a model</html>" * 50)
    lifecycle = lifecycle_of([CHATML], sf_model_cache)
    hub = ModelHub(lifecycle)

    async def scenario() -> None:
        await lifecycle.add(f"hf:{REPO}/missing.gguf")
        await lifecycle.add(f"hf:{REPO}/page.gguf")
        await until(lifecycle, lambda: lifecycle.state("page").state == "failed")
        await until(lifecycle, lambda: lifecycle.state("missing").state == "failed")
        with pytest.raises(ModelUnavailable) as err:
            await hub.get("missing")  # tries again, and fails again, within the wait
        assert err.value.status == 503 and "has no file missing.gguf" in err.value.message
        with pytest.raises(ModelFailed):
            await lifecycle.ready("page")
        await lifecycle.close()

    asyncio.run(scenario())
    page = lifecycle.state("page")
    assert page.error_code == "model_unavailable"
    assert page.error is not None and "not a GGUF model file" in page.error
    assert "--model superfluid/tiny-qwen3" in page.error  # the offline advice
    assert cached_file(HubFile(REPO, "page.gguf")) is None


def test_a_model_that_cannot_load_fails_with_model_load_failed(
    sf_model_cache: Path, tmp_path: Path
) -> None:
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF" + b"\0" * 64)
    lifecycle = lifecycle_of([str(broken), f"gone={tmp_path / 'gone.gguf'}"], sf_model_cache)
    assert lifecycle.state("gone").state == "failed"
    assert lifecycle.state("gone").error == f"no such model file: {tmp_path / 'gone.gguf'}"
    hub = ModelHub(lifecycle)

    async def scenario() -> None:
        with pytest.raises(Exception) as err:
            await hub.get("broken")
        assert getattr(err.value, "code", None) == "model_load_failed"
        await lifecycle.close()

    asyncio.run(scenario())
    assert states_of(lifecycle, "broken") == ["loading", "failed"]


def test_adding_the_same_id_with_another_spec_conflicts(sf_model_cache: Path) -> None:
    lifecycle = lifecycle_of([CHATML], sf_model_cache)

    async def scenario() -> None:
        with pytest.raises(ModelConflict, match="served already"):
            await lifecycle.add(f"{CHATML}={QWEN}")
        with pytest.raises(ValueError, match="invalid model spec"):
            await lifecycle.add("not a model")
        state, created = await lifecycle.add(CHATML)
        assert not created and state.origin == "config"
        await lifecycle.close()

    asyncio.run(scenario())


def test_removing_models_and_their_files(
    sf_model_cache: Path, hub_env: Path, local_hub: LocalHub, gguf_bytes: bytes, tmp_path: Path
) -> None:
    spec = local_hub.add(REPO, "tiny.gguf", gguf_bytes)
    mine = tmp_path / "mine.gguf"
    mine.write_bytes(gguf_bytes)
    lifecycle = lifecycle_of([CHATML, str(mine)], sf_model_cache)

    async def scenario() -> None:
        await lifecycle.add(spec, load=True)
        await until(lifecycle, lambda: lifecycle.state("tiny").state == "loaded")
        with pytest.raises(ValueError, match="never deletes it"):
            await lifecycle.remove("mine", delete_files=True)
        removed = await lifecycle.remove("tiny", delete_files=True)
        assert removed.state == "unloaded"  # removing unloads first; the event carries it
        await lifecycle.remove(CHATML)
        await lifecycle.close()

    asyncio.run(scenario())
    assert lifecycle.ids() == ["mine"] and mine.exists()
    assert cached_file(HubFile(REPO, "tiny.gguf")) is None
    assert events_of(lifecycle, "tiny")[-1].type == "model.removed"


def test_run_time_changes_outlive_a_restart(
    sf_model_cache: Path, hub_env: Path, local_hub: LocalHub, gguf_bytes: bytes, tmp_path: Path
) -> None:
    spec = local_hub.add(REPO, "tiny.gguf", gguf_bytes)
    half = len(gguf_bytes) // 2
    local_hub.pause_at(half)
    configured = [CHATML, QWEN]
    store = Store(tmp_path / "store")

    async def before_restart() -> None:
        lifecycle = lifecycle_of(configured, sf_model_cache, store=store)
        await lifecycle.add(spec)
        await asyncio.to_thread(local_hub.wait_reached)
        await until(lifecycle, lambda: partial_bytes(HubFile(REPO, "tiny.gguf")) == half)
        await lifecycle.remove(QWEN)
        await lifecycle.close()  # as a server stopping mid-download

    asyncio.run(before_restart())
    local_hub.release()
    specs, origins = served_specs(configured, store.served_model_changes())
    assert specs == [CHATML, spec] and origins == {CHATML: "config", "tiny": "added"}
    registry = ModelRegistry(specs, cache_dir=sf_model_cache, context_size=256)
    lifecycle = ModelLifecycle(registry, origins, store=store)
    tiny = lifecycle.state("tiny")
    assert tiny.state == "not_downloaded" and tiny.progress is not None
    assert tiny.progress.done == half  # the partial file, seen without asking the hub

    async def after_restart() -> None:
        await lifecycle.resume()
        await until(lifecycle, lambda: lifecycle.state("tiny").state == "available")
        await lifecycle.close()

    asyncio.run(after_restart())
    assert local_hub.gets()[-1].start == half
    store.close()


def test_the_event_log_keeps_the_last_events_and_wakes_followers() -> None:
    log = EventLog(retention=3)
    state = ModelState("m", "m.gguf", "path", "available")

    async def scenario() -> None:
        waiter = asyncio.ensure_future(log.wait(0, 30))
        await asyncio.sleep(0)
        log.append("model.state", state)
        assert await waiter is True
        assert await log.wait(1, 0.01) is False  # nothing after 1 yet
        for _ in range(4):
            log.append("model.progress", state)
        log.close()
        assert await log.wait(5, 30) is True  # closed: followers finish

    asyncio.run(scenario())
    assert [e.id for e in log.after(2) or []] == [3, 4, 5]
    assert log.after(1) is None  # event 2 is no longer kept
    assert log.after(5) == []
    assert log.after(6) is None  # not an id of this log (a later server's)
    later = EventLog(start=1000)
    assert later.after(1000) == [] and later.after(5) is None  # an earlier server's id

"""``%respond models|pull|load|unload|rm`` and ``jupyter_superfluid.pull`` in a plain shell.

No widgets here (a bare IPython shell): the progress is text lines. The server
downloads from a hub on loopback, held midway where a test looks midway; a helper
thread lets it go once the download got there, so nothing races.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from IPython.core.error import UsageError
from support.hub_server import CHATML, REPO, hub_files, hub_serving, serve_with_hub
from support.local_hub import LocalHub

import jupyter_superfluid
from jupyter_superfluid.notebook import client as discovery
from jupyter_superfluid.notebook.models import ModelsClient
from jupyter_superfluid.notebook.pull import PullFailed
from jupyter_superfluid.notebook.render import (
    WAITING_EVENT,
    TextRenderer,
    register_renderer,
    unregister_renderer,
)
from jupyter_superfluid.notebook.respond import NotebookSession
from jupyter_superfluid.notebook.result import Reply
from jupyter_superfluid.pytest_plugin import StandaloneServer


@pytest.fixture(scope="module")
def files(sf_model_cache: Path) -> dict[str, bytes]:
    return hub_files(sf_model_cache, ["pulled", "asked", "lib"])


@pytest.fixture(scope="module")
def hub(files: dict[str, bytes]) -> Iterator[LocalHub]:
    with hub_serving(files) as hub:
        yield hub


@pytest.fixture(scope="module")
def server(
    hub: LocalHub, sf_model_cache: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[StandaloneServer]:
    server = serve_with_hub(hub, sf_model_cache, tmp_path_factory.mktemp("nb-models"))
    yield server
    server.stop()


@pytest.fixture
def shell(ipython: Any, server: StandaloneServer, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The bare shell, talking to the hub-backed server, with fresh magic state."""
    monkeypatch.setenv(discovery.ENV_BASE_URL, server.base_url)
    monkeypatch.delenv(discovery.ENV_API_KEY, raising=False)
    monkeypatch.delenv(discovery.ENV_MODEL, raising=False)
    ipython.magics_manager.registry["RespondMagics"].session = NotebookSession()
    return ipython


def release_when_held(hub: LocalHub, files: dict[str, bytes], name: str) -> threading.Thread:
    """Hold ``name``'s download at half, and let it go once the server has that half."""
    half = len(files[name]) // 2
    hub.pause_at(half)

    def release() -> None:
        hub.wait_reached()
        client = ModelsClient()  # the same server, found from the environment
        try:
            for event, data in client.follow(name):
                progress = (data.get("model") or {}).get("progress") or {}
                if event == "model.progress" and progress.get("done_bytes") == half:
                    break
        finally:
            client.close()
            hub.release()

    thread = threading.Thread(target=release, daemon=True)
    thread.start()
    return thread


def test_pull_prints_the_download_then_models_lists_it(
    shell: Any, hub: LocalHub, files: dict[str, bytes], capsys: Any
) -> None:
    releaser = release_when_held(hub, files, "pulled")
    shell.run_line_magic("respond", f"pull hf:{REPO}/pulled.gguf")
    releaser.join(60)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("pulled: downloading")
    assert "pulled: downloading 50% (" in "\n".join(lines)  # held at half: it said so
    assert lines[-1] == "pulled: available"
    shell.run_line_magic("respond", "-m pulled")  # the default of later cells
    capsys.readouterr()
    shell.run_line_magic("respond", "models")
    listing = capsys.readouterr().out.splitlines()
    assert f"  {CHATML}: available" in listing and "* pulled: available" in listing


def test_load_unload_and_rm(shell: Any, capsys: Any) -> None:
    shell.run_line_magic("respond", f"pull extra={CHATML}")  # a built-in: nothing to fetch
    shell.run_line_magic("respond", "load extra")
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == "extra: loaded"
    shell.run_line_magic("respond", "unload extra")
    assert capsys.readouterr().out.splitlines() == ["extra: unloaded"]
    shell.run_line_magic("respond", "rm extra")
    assert capsys.readouterr().out.splitlines() == ["extra: removed"]
    with pytest.raises(UsageError, match="404 model_not_found"):
        shell.run_line_magic("respond", "unload extra")


class WaitingRecorder(TextRenderer):
    """Plain output that records every event, and lets the hub go when the cell waits."""

    def __init__(self, hub: LocalHub) -> None:
        super().__init__()
        self.hub = hub
        self.events: list[dict[str, Any]] = []

    def on_event(self, event: Any) -> None:
        self.events.append(dict(event))
        if event.get("type") == WAITING_EVENT:
            self.hub.release()  # the cell is waiting, and has said where the model is
        super().on_event(event)


def test_a_cell_on_a_model_that_is_downloading_waits_with_progress(
    shell: Any, hub: LocalHub, files: dict[str, bytes], capsys: Any
) -> None:
    hub.pause_at(len(files["asked"]) // 2)
    client = ModelsClient()
    assert client.add(f"hf:{REPO}/asked.gguf")["state"] == "downloading"
    recorder = WaitingRecorder(hub)
    factory = lambda _shell: recorder  # noqa: E731
    register_renderer(factory)
    try:
        reply = shell.run_cell_magic("respond", "-m asked --max-tokens 3 --seed 1", "Hi")
    finally:
        unregister_renderer(factory)
        hub.release()
    assert isinstance(reply, Reply) and reply.model == "asked"
    kinds = [e["type"] for e in recorder.events]
    waiting = [e["model"] for e in recorder.events if e["type"] == WAITING_EVENT]
    assert waiting[0]["id"] == "asked" and waiting[0]["state"] == "downloading"
    assert waiting[-1]["state"] not in ("downloading", "loading")  # settled, then the retry
    assert kinds.index("response.created") > kinds.index(WAITING_EVENT)  # then it streamed
    assert WAITING_EVENT not in kinds[kinds.index("response.created") :]
    assert capsys.readouterr().out.startswith("asked: downloading")
    assert client.get("asked")["state"] == "loaded"
    client.close()


def test_pull_from_python_and_its_failures(shell: Any) -> None:
    state = jupyter_superfluid.pull(f"hf:{REPO}/lib.gguf", load=True)
    assert state["id"] == "lib" and state["state"] == "loaded"
    with pytest.raises(PullFailed, match=r"has no file nothing\.gguf \(HTTP 404\)"):
        jupyter_superfluid.pull(f"hf:{REPO}/nothing.gguf")
    with pytest.raises(UsageError, match="needs a model spec"):
        shell.run_line_magic("respond", "pull")
    with pytest.raises(UsageError, match="400 invalid_request: invalid model spec"):
        shell.run_line_magic("respond", "pull not-a-model")
    with pytest.raises(UsageError, match="takes no positional arguments"):
        shell.run_cell_magic("respond", "models", "Hi")

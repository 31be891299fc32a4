"""``ModelsView`` and the waiting ResponseView in a real kernel, as JupyterLab drives them.

The kernel talks to a standalone server that downloads from a hub on loopback; the
hub holds a download midway until the widget shows it midway (a thread watches the
synced state and lets the hub go), so every check is of a state the test saw.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jupyter_client.manager import KernelManager
from support.hub_server import CHATML, REPO, hub_files, hub_serving, serve_with_hub
from support.local_hub import LocalHub

from jupyter_superfluid.pytest_plugin import StandaloneServer
from tests.notebook.widgets.conftest import KernelFront

QWEN = "superfluid/tiny-qwen3"


@pytest.fixture(scope="module")
def files(sf_model_cache: Path) -> dict[str, bytes]:
    return hub_files(sf_model_cache, ["pulled", "asked"])


@pytest.fixture(scope="module")
def hub(files: dict[str, bytes]) -> Iterator[LocalHub]:
    with hub_serving(files) as hub:
        yield hub


@pytest.fixture(scope="module")
def server(
    hub: LocalHub, sf_model_cache: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[StandaloneServer]:
    work = tmp_path_factory.mktemp("widget-models")
    server = serve_with_hub(hub, sf_model_cache, work, models=(CHATML, QWEN))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def front(server: StandaloneServer) -> Iterator[KernelFront]:
    """A kernel whose magic talks to the hub-backed server."""
    env = {**os.environ, "SUPERFLUID_BASE_URL": server.base_url, "SUPERFLUID_API_KEY": "k"}
    env.pop("SUPERFLUID_WIDGETS", None)
    env.pop("SUPERFLUID_MODEL", None)
    km = KernelManager(kernel_name="python3")
    km.start_kernel(env=env)
    kf = KernelFront(km)
    kf.run("%load_ext jupyter_superfluid")
    yield kf
    kf.close()


def opened(outputs: list[dict[str, Any]], model_name: str) -> list[str]:
    """Comm ids of the widgets of one kind that a cell opened."""
    return [
        m["content"]["comm_id"]
        for m in outputs
        if m["msg_type"] == "comm_open"
        and m["content"]["data"]["state"].get("_model_name") == model_name
    ]


def rows(front: KernelFront, comm: str) -> dict[str, dict[str, Any]]:
    return {r["id"]: r for r in front.models[comm]["models"]}


def release_when(front: KernelFront, hub: LocalHub, seen: Any) -> threading.Thread:
    """Let the hub go once ``seen()`` holds for the synced widget state."""

    def release() -> None:
        try:
            front.wait(seen, 120)
        finally:
            hub.release()

    thread = threading.Thread(target=release, daemon=True)
    thread.start()
    return thread


def newest(front: KernelFront, model_name: str) -> str | None:
    """The comm id of the last widget of a kind the kernel opened."""
    ids = [c for c, s in front.models.items() if s.get("_model_name") == model_name]
    return ids[-1] if ids else None


def test_models_lists_the_models_and_its_buttons_act(front: KernelFront) -> None:
    out = front.run("%respond models", cell_id="m1")
    [comm] = opened(out, "ModelsViewModel")
    front.wait(lambda: front.models[comm]["live"] and CHATML in rows(front, comm), 60)
    assert rows(front, comm)[CHATML]["state"] == "available" and front.models[comm]["only"] == []
    front.send_custom(comm, {"type": "load", "id": CHATML})
    front.wait(lambda: rows(front, comm)[CHATML]["state"] == "loaded", 120)
    states = [u["models"] for u in front.updates(comm) if "models" in u]
    seen = [next(r["state"] for r in m if r["id"] == CHATML) for m in states]
    assert seen.index("loading") < seen.index("loaded")
    front.send_custom(comm, {"type": "default", "id": QWEN})
    front.wait(lambda: front.models[comm]["default_model"] == QWEN, 30)
    magic = "get_ipython().magics_manager.registry['RespondMagics'].session.defaults.model"
    assert front.value(magic) == QWEN  # later cells use it
    front.send_custom(comm, {"type": "unload", "id": CHATML})
    front.wait(lambda: rows(front, comm)[CHATML]["state"] == "unloaded", 60)
    front.wait(lambda: front.models[comm]["pending"] == {}, 60)  # the call has returned
    assert front.models[comm]["error"] == ""


def test_pull_shows_one_row_with_the_download_as_it_goes(
    front: KernelFront, hub: LocalHub, files: dict[str, bytes]
) -> None:
    half = len(files["pulled"]) // 2
    hub.pause_at(half)

    def held() -> bool:
        comm = newest(front, "ModelsViewModel")
        row = rows(front, comm).get("pulled") if comm else None
        return bool(row and (row.get("progress") or {}).get("done_bytes") == half)

    releaser = release_when(front, hub, held)
    out = front.run(f"%respond pull hf:{REPO}/pulled.gguf", cell_id="m2")
    releaser.join(60)
    [comm] = opened(out, "ModelsViewModel")
    assert front.models[comm]["only"] == ["pulled"]
    assert rows(front, comm)["pulled"]["state"] == "available"
    progress = [
        u["models"][0]["progress"]
        for u in front.updates(comm)
        if u.get("models") and u["models"][0]["state"] == "downloading"
    ]
    done = [p["done_bytes"] for p in progress if p]
    assert half in done and done == sorted(done)
    assert progress[-1]["total_bytes"] == len(files["pulled"])
    front.send_custom(comm, {"type": "remove", "id": "pulled"})
    front.wait(lambda: "pulled" not in rows(front, comm), 60)


def test_a_cell_waiting_for_its_model_shows_the_progress_in_its_view(
    front: KernelFront, hub: LocalHub, files: dict[str, bytes]
) -> None:
    hub.pause_at(len(files["asked"]) // 2)
    adding = "from jupyter_superfluid.notebook.models import ModelsClient as C\n"
    front.run(adding + f"C().add('hf:{REPO}/asked.gguf')")

    def waiting() -> bool:
        comm = newest(front, "ResponseViewModel")
        shown = front.models[comm].get("waiting") if comm else None
        return bool(shown and shown["state"] == "downloading")

    releaser = release_when(front, hub, waiting)
    out = front.run("%%respond -m asked --new --max-tokens 3 --seed 1\nHi", cell_id="m3")
    releaser.join(60)
    [comm] = opened(out, "ResponseViewModel")
    state = front.models[comm]
    assert state["status"] in ("completed", "incomplete") and state["waiting"] is None
    shown = [u["waiting"] for u in front.updates(comm) if u.get("waiting")]
    assert shown[0]["id"] == "asked" and shown[0]["state"] == "downloading"
    assert state["response_id"].startswith("resp_") and state["model"] == "asked"


def test_the_models_view_holds_the_traits_of_the_contract(front: KernelFront) -> None:
    front.run("from jupyter_superfluid.notebook.widgets import ModelsView\nmv = ModelsView()")
    state = front.models[front.comm_of("mv")]
    root = Path(__file__).resolve().parents[3]
    contract = (root / "labextension/src/contract.ts").read_text()
    assert (state["_model_name"], state["_view_name"]) == ("ModelsViewModel", "ModelsViewView")
    for trait in ("models", "default_model", "only", "pending", "error", "live"):
        assert trait in state and f"  {trait}:" in contract
    assert "  waiting: ModelRow | null;" in contract  # the ResponseView's waiting bar
    front.run("mv.close()")

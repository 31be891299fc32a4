"""Hub downloads through a real huggingface_hub against a hub on loopback (HF_ENDPOINT).

Progress arrives in order and reaches the total; an interrupted download (the hub
killed mid-body) keeps its partial file and a later one continues from it with a
Range request; a 404, a file that is not GGUF and a size the hub lied about each end
with a reason that says so; a cancelled download keeps its partial file.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from support.local_hub import LocalHub

from jupyter_superfluid.models.downloads import (
    DownloadCancelled,
    DownloadError,
    DownloadProgress,
    HubDownload,
)
from jupyter_superfluid.models.hub_cache import HubFile, cached_file, delete_cached, partial_bytes

REPO = "sf-test/tiny-GGUF"


@pytest.fixture
def gguf_bytes(sf_models: dict[str, Path]) -> bytes:
    """A real GGUF file's bytes (the tiny Qwen3-style model, about 0.5 MB)."""
    return sf_models["superfluid/tiny-qwen3"].read_bytes()


def wait_until(predicate: Callable[[], bool], timeout: float = 60) -> None:
    """Poll ``predicate`` until it holds (a wait, not a timing assertion)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("the condition did not come true")
        time.sleep(0.01)


def _run_in_thread(download: HubDownload) -> tuple[threading.Thread, dict[str, object]]:
    outcome: dict[str, object] = {}

    def run() -> None:
        try:
            outcome["paths"] = download.run()
        except Exception as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    return thread, outcome


def test_a_download_reports_progress_in_order_up_to_the_total(
    hub_env: Path, local_hub: LocalHub, gguf_bytes: bytes
) -> None:
    local_hub.add(REPO, "tiny.gguf", gguf_bytes)
    local_hub.state.rate = 2_000_000  # about a quarter of a second for the file
    seen: list[DownloadProgress] = []
    download = HubDownload([HubFile(REPO, "tiny.gguf")], on_progress=seen.append, interval_s=0)
    (path,) = download.run()
    assert path.read_bytes() == gguf_bytes
    assert cached_file(HubFile(REPO, "tiny.gguf")) == path  # huggingface_hub finds it offline
    assert [p.done for p in seen] == sorted(p.done for p in seen)
    assert seen[0].done == 0 and seen[-1].done == len(gguf_bytes)
    assert {p.total for p in seen} == {len(gguf_bytes)}
    assert len(seen) > 3  # as the bytes arrive, not one jump at the end
    assert {p.file for p in seen} == {"tiny.gguf"}
    again = HubDownload([HubFile(REPO, "tiny.gguf")])
    assert again.run() == [path]
    assert len(local_hub.gets()) == 1  # a cached file is not fetched twice


def test_a_killed_download_resumes_from_its_partial_file(
    hub_env: Path, local_hub: LocalHub, gguf_bytes: bytes
) -> None:
    local_hub.add(REPO, "tiny.gguf", gguf_bytes)
    file = HubFile(REPO, "tiny.gguf")
    half = len(gguf_bytes) // 2
    local_hub.pause_at(half)
    first = HubDownload([file], retries=1, backoff_s=0.05)
    thread, outcome = _run_in_thread(first)
    local_hub.wait_reached()
    wait_until(lambda: partial_bytes(file) == half)  # the client has what was sent
    local_hub.kill()  # mid-body: the connection drops, the hub is gone
    thread.join(60)
    error = outcome["error"]
    assert isinstance(error, DownloadError)
    assert "interrupted" in str(error) and "try again to resume" in str(error)
    assert partial_bytes(file) == half
    assert cached_file(file) is None

    local_hub.start()  # the same port: HF_ENDPOINT still points at it
    seen: list[DownloadProgress] = []
    (path,) = HubDownload([file], on_progress=seen.append, interval_s=0).run()
    assert path.read_bytes() == gguf_bytes
    etag = local_hub.etag(REPO, "tiny.gguf")
    last = local_hub.gets(etag)[-1]
    assert last.ranged and last.start == half  # only the rest was fetched
    assert seen[0].done == half and seen[-1].done == len(gguf_bytes)
    assert partial_bytes(file) == 0


def test_a_cancelled_download_keeps_its_partial_file(
    hub_env: Path, local_hub: LocalHub, gguf_bytes: bytes
) -> None:
    local_hub.add(REPO, "tiny.gguf", gguf_bytes)
    file = HubFile(REPO, "tiny.gguf")
    local_hub.pause_at(100_000)
    download = HubDownload([file])
    thread, outcome = _run_in_thread(download)
    local_hub.wait_reached()
    wait_until(lambda: partial_bytes(file) == 100_000)
    download.cancel()  # the hub is silent: cancel() must unblock the read
    thread.join(60)
    assert isinstance(outcome["error"], DownloadCancelled)
    assert partial_bytes(file) == 100_000
    local_hub.release()
    (path,) = HubDownload([file]).run()
    assert path.read_bytes() == gguf_bytes
    assert local_hub.gets()[-1].start == 100_000


def test_unknown_repositories_and_files_fail_with_the_reason(
    hub_env: Path, local_hub: LocalHub, gguf_bytes: bytes
) -> None:
    local_hub.add(REPO, "tiny.gguf", gguf_bytes)
    with pytest.raises(DownloadError, match=r"has no file missing\.gguf \(HTTP 404\)"):
        HubDownload([HubFile(REPO, "missing.gguf")]).run()
    with pytest.raises(DownloadError, match=r"no repository nobody/nothing \(HTTP 404"):
        HubDownload([HubFile("nobody/nothing", "x.gguf")]).run()


def test_a_file_that_is_not_gguf_fails_and_is_not_kept(hub_env: Path, local_hub: LocalHub) -> None:
    local_hub.add(REPO, "page.gguf", b"<!DOCTYPE html><html>rate limited</html>" * 100)
    file = HubFile(REPO, "page.gguf")
    with pytest.raises(DownloadError, match=r"not a GGUF model file: it begins with b'<!DOCTYPE"):
        HubDownload([file]).run()
    assert partial_bytes(file) == 0 and cached_file(file) is None
    blobs = list((hub_env / "hub").glob("models--*/blobs/*"))
    assert not [b for b in blobs if not b.name.startswith(".superfluid")]


def test_a_truncated_gguf_fails_as_invalid(
    hub_env: Path, local_hub: LocalHub, gguf_bytes: bytes
) -> None:
    local_hub.add(REPO, "cut.gguf", gguf_bytes[:5000])  # the magic, then a cut header
    with pytest.raises(DownloadError, match=r"not a valid GGUF file"):
        HubDownload([HubFile(REPO, "cut.gguf")]).run()


def test_sizes_the_hub_lied_about_fail_with_both_sizes(
    hub_env: Path, local_hub: LocalHub, gguf_bytes: bytes
) -> None:
    local_hub.add(REPO, "short.gguf", gguf_bytes, declared_size=len(gguf_bytes) + 1000)
    with pytest.raises(DownloadError, match=r"has only .* of hf:.*, not the .* it announced"):
        HubDownload([HubFile(REPO, "short.gguf")], retries=1, backoff_s=0.01).run()
    local_hub.add(REPO, "long.gguf", gguf_bytes, declared_size=len(gguf_bytes) - 1000)
    with pytest.raises(DownloadError, match=r"longer than the .* the hub said"):
        HubDownload([HubFile(REPO, "long.gguf")]).run()


def test_a_model_and_its_projector_download_as_one_progress(
    hub_env: Path, local_hub: LocalHub, gguf_bytes: bytes, sf_models: dict[str, Path]
) -> None:
    projector = sf_models["superfluid/tiny-vision"].read_bytes()
    local_hub.add(REPO, "model.gguf", gguf_bytes)
    local_hub.add(REPO, "mmproj.gguf", projector)
    seen: list[DownloadProgress] = []
    files = [HubFile(REPO, "model.gguf"), HubFile(REPO, "mmproj.gguf")]
    paths = HubDownload(files, on_progress=seen.append, interval_s=0).run()
    assert [p.read_bytes() for p in paths] == [gguf_bytes, projector]
    total = len(gguf_bytes) + len(projector)
    assert {p.total for p in seen} == {total} and seen[-1].done == total
    assert next(p.file for p in seen) == "model.gguf" and seen[-1].file == "mmproj.gguf"


def test_delete_cached_removes_the_link_the_blob_and_any_partial(
    hub_env: Path, local_hub: LocalHub, gguf_bytes: bytes
) -> None:
    local_hub.add(REPO, "tiny.gguf", gguf_bytes)
    file = HubFile(REPO, "tiny.gguf")
    (path,) = HubDownload([file]).run()
    blob = path.resolve()
    removed = delete_cached(file)
    assert path in removed and blob in removed
    assert not path.exists() and not blob.exists() and cached_file(file) is None


def test_delete_cached_keeps_a_blob_another_file_still_uses(
    hub_env: Path, local_hub: LocalHub, gguf_bytes: bytes
) -> None:
    local_hub.add(REPO, "one.gguf", gguf_bytes)
    local_hub.add(REPO, "two.gguf", gguf_bytes)  # the same bytes: one blob
    one, two = HubFile(REPO, "one.gguf"), HubFile(REPO, "two.gguf")
    (first,) = HubDownload([one]).run()
    (second,) = HubDownload([two]).run()
    assert first.resolve() == second.resolve()
    removed = delete_cached(one)
    assert removed == [first] and second.read_bytes() == gguf_bytes
    assert cached_file(one) is None and cached_file(two) == second

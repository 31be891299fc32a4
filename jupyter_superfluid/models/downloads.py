"""Model files from the Hugging Face hub into its cache: resumable, with progress, checked.

huggingface_hub 2.x gives each download a process-unique temporary file that it deletes
when the download fails, and reads the body in 10 MB chunks: an interrupted download
starts over, and its progress moves in 10 MB steps that cannot be cancelled between.
So the bytes are fetched here, into a stable partial file beside the cache's blobs
(``blobs/<etag>.incomplete``, the name huggingface_hub itself used to resume from),
continued with a ``Range`` request after any interruption (a dropped connection, a
server restart, a cancelled download), and checked as GGUF. huggingface_hub still does
everything else: the endpoint (``HF_ENDPOINT``), the token, the metadata (redirects,
ETag, size, commit) and the cache entry (the ref and the snapshot link) once the blob
is in place, so that ``hf_hub_download`` finds the file afterwards.

Everything here blocks: callers run it in a thread. ``HubDownload.cancel`` stops a
download from any thread, keeping its partial file.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jupyter_superfluid.engine.base import EngineError
from jupyter_superfluid.models.download_progress import (
    DownloadProgress,
    ProgressMeter,
    ProgressSink,
    size_text,
)
from jupyter_superfluid.models.hub_cache import (
    HubFile,
    cached_file,
    hub_cache_dir,
    hub_endpoint,
    hub_offline,
    partial_marker,
    probe_hub,
    repo_folder,
)

log = logging.getLogger(__name__)

__all__ = [
    "DownloadCancelled",
    "DownloadError",
    "DownloadProgress",
    "HubDownload",
    "ProgressSink",
    "size_text",
]

HUB_ETAG_TIMEOUT_S = 5.0
GGUF_MAGIC = b"GGUF"
TRANSIENT_STATUS = (408, 429, 500, 502, 503, 504)


class DownloadError(EngineError):
    """A hub file that cannot be fetched now; the message says why, for people."""


class DownloadCancelled(EngineError):
    """The download was cancelled; its partial file is kept for a later resume."""


@dataclass
class _Remote:
    """What the hub says about one file."""

    file: HubFile
    url: str
    etag: str
    size: int | None


class HubDownload:
    """Fetch some hub files into the cache: resumable, cancellable, with progress."""

    def __init__(
        self,
        files: Sequence[HubFile],
        *,
        on_progress: ProgressSink | None = None,
        retries: int = 5,
        backoff_s: float = 1.0,
        interval_s: float = 0.25,
    ) -> None:
        self.files = list(files)
        self.retries = retries  # attempts in a row that fetch nothing, before giving up
        self.backoff_s = backoff_s
        self._meter = ProgressMeter(on_progress, interval_s)
        self._cancel = threading.Event()
        self._response: Any = None  # the body being read, closed by cancel()

    def cancel(self) -> None:
        """Stop the download from any thread; ``run`` raises DownloadCancelled."""
        self._cancel.set()
        response = self._response
        if response is None:
            return
        # Closing the response does not wake a read blocked on a silent server;
        # shutting its socket down does (the reader then sees an error, and stops).
        try:
            stream = response.extensions["network_stream"]
            stream.get_extra_info("socket").shutdown(socket.SHUT_RDWR)
        except Exception:  # no socket (already closed, or another transport): nothing blocks
            pass

    @property
    def cancelled(self) -> bool:
        """Whether ``cancel`` was called."""
        return self._cancel.is_set()

    def run(self) -> list[Path]:
        """The local paths of every file, fetching the missing ones (blocking)."""
        found = {f: cached_file(f) for f in self.files}
        missing = [f for f, path in found.items() if path is None]
        if missing:
            if hub_offline():
                raise DownloadError("HF_HUB_OFFLINE is set")
            reason = probe_hub()
            if reason is not None:
                raise DownloadError(reason)
            remotes = [self._metadata(f) for f in missing]
            sizes = [r.size for r in remotes]
            self._meter.total = None if None in sizes else sum(s or 0 for s in sizes)
            stop = threading.Event()
            ticker = threading.Thread(target=self._meter.tick, args=(stop,), daemon=True)
            ticker.start()
            try:
                for remote in remotes:
                    found[remote.file] = self._fetch(remote)
            finally:
                stop.set()
                ticker.join()
        return [path for path in found.values() if path is not None]

    # -- metadata ------------------------------------------------------------------

    def _metadata(self, file: HubFile) -> _Remote:
        """URL, ETag and size of ``file``, or a DownloadError saying what the hub answered."""
        from huggingface_hub import get_hf_file_metadata, hf_hub_url
        from huggingface_hub.errors import (
            EntryNotFoundError,
            GatedRepoError,
            HfHubHTTPError,
            RepositoryNotFoundError,
            RevisionNotFoundError,
        )

        url = hf_hub_url(file.repo_id, file.filename, endpoint=hub_endpoint())
        try:
            meta = get_hf_file_metadata(url, timeout=HUB_ETAG_TIMEOUT_S)
        except GatedRepoError as exc:
            raise DownloadError(
                f"{file.repo_id} is gated: accept its terms on the hub and set HF_TOKEN"
            ) from exc
        except RepositoryNotFoundError as exc:
            raise DownloadError(
                f"the hub has no repository {file.repo_id} (HTTP {_status(exc)}; "
                "if it is private, set HF_TOKEN)"
            ) from exc
        except (EntryNotFoundError, RevisionNotFoundError) as exc:
            raise DownloadError(
                f"the repository {file.repo_id} has no file {file.filename} (HTTP {_status(exc)})"
            ) from exc
        except HfHubHTTPError as exc:
            raise DownloadError(f"the hub answered HTTP {_status(exc)} for {file.spec}") from exc
        except Exception as exc:  # connection refused, timeouts, TLS: the hub is not there
            raise DownloadError(f"cannot reach the hub: {type(exc).__name__}: {exc}") from exc
        if not meta.etag:
            raise DownloadError(f"the hub gave no ETag for {file.spec}")
        return _Remote(file, str(meta.location or url), meta.etag, meta.size)

    # -- the bytes -----------------------------------------------------------------

    def _fetch(self, remote: _Remote) -> Path:
        """Fetch one file into its blob, resuming its partial file; its cache path."""
        blobs = repo_folder(remote.file.repo_id) / "blobs"
        blobs.mkdir(parents=True, exist_ok=True)
        blob = blobs / remote.etag
        partial = blobs / f"{remote.etag}.incomplete"
        self._meter.file = remote.file.filename
        if not blob.exists():
            partial_marker(remote.file).write_text(remote.etag)
            have = partial.stat().st_size if partial.exists() else 0
            if remote.size is not None and have > remote.size:
                partial.unlink()  # longer than the file: not a prefix of it
                have = 0
            if have:
                log.info("resuming %s at %d bytes", remote.file.spec, have)
            self._meter.done += have
            self._meter.report(force=True)
            self._fetch_into(remote, partial, have)
            _check_gguf(partial, remote.file)
            os.replace(partial, blob)
            partial_marker(remote.file).unlink(missing_ok=True)
        return self._install(remote)

    def _fetch_into(self, remote: _Remote, partial: Path, have: int) -> None:
        """Append the rest of the file to ``partial``, retrying interruptions."""
        import httpx

        idle_attempts = 0
        with httpx.Client(follow_redirects=True, timeout=httpx.Timeout(30.0)) as http:
            while remote.size is None or have < remote.size:
                self._check_cancelled()
                before = have
                try:
                    have, finished = self._stream(http, remote, partial, have)
                except (DownloadError, DownloadCancelled):
                    raise
                except Exception as exc:
                    self._check_cancelled()  # cancel() closed the body under the reader
                    if not isinstance(exc, httpx.TransportError | _Interrupted):
                        raise
                    have = partial.stat().st_size if partial.exists() else 0
                    idle_attempts = 0 if have > before else idle_attempts + 1
                    if idle_attempts > self.retries:
                        raise DownloadError(
                            f"the download of {remote.file.spec} was interrupted at "
                            f"{size_text(have)} of {size_text(remote.size)} ({exc}); the partial "
                            "file is kept: try again to resume"
                        ) from exc
                    log.warning("download of %s interrupted (%s); resuming", remote.file.spec, exc)
                    self._cancel.wait(self.backoff_s)
                    continue
                if finished:
                    break
        self._check_cancelled()
        if remote.size is not None and have != remote.size:
            partial.unlink(missing_ok=True)
            raise DownloadError(
                f"{remote.file.spec} is {size_text(have)} but the hub said {size_text(remote.size)}"
            )

    def _stream(self, http: Any, remote: _Remote, partial: Path, have: int) -> tuple[int, bool]:
        """One GET from ``have`` on; (bytes now in ``partial``, whether the body ended whole)."""
        from huggingface_hub.utils import build_hf_headers

        headers = build_hf_headers()
        headers["Accept-Encoding"] = "identity"
        if have:
            headers["Range"] = f"bytes={have}-"
        with http.stream("GET", remote.url, headers=headers) as response:
            self._response = response
            try:
                if response.status_code == 416 and have:
                    if have == remote.size:
                        return have, True
                    partial.unlink(missing_ok=True)
                    raise DownloadError(
                        f"the hub has only {size_text(have)} of {remote.file.spec}, "
                        f"not the {size_text(remote.size)} it announced"
                    )
                if response.status_code in TRANSIENT_STATUS:
                    raise _Interrupted(f"HTTP {response.status_code}")
                if response.status_code >= 400:
                    raise DownloadError(
                        f"the hub answered HTTP {response.status_code} to the download of "
                        f"{remote.file.spec}"
                    )
                if have and response.status_code != 206:  # the Range was ignored: start over
                    self._meter.done -= have
                    have = 0
                    partial.unlink(missing_ok=True)
                have = self._copy(response, remote, partial, have)
            finally:
                self._response = None
        return have, remote.size is None or have >= remote.size

    def _copy(self, response: Any, remote: _Remote, partial: Path, have: int) -> int:
        """Append the body to ``partial``; the bytes it then holds."""
        # Unbuffered: the bytes counted done are in the file (the OS's), so a process
        # killed right after a progress report resumes from exactly what it reported.
        with open(partial, "ab", buffering=0) as out:
            for chunk in response.iter_bytes():  # as it arrives: nothing held back on a drop
                self._check_cancelled()
                if have == 0 and not chunk.startswith(GGUF_MAGIC[: len(chunk)]):
                    out.close()
                    partial.unlink(missing_ok=True)
                    raise DownloadError(_not_gguf(remote.file, chunk))
                if remote.size is not None and have + len(chunk) > remote.size:
                    out.close()
                    partial.unlink(missing_ok=True)
                    raise DownloadError(
                        f"{remote.file.spec} is longer than the "
                        f"{size_text(remote.size)} the hub said"
                    )
                _write_all(out, chunk)
                have += len(chunk)
                self._meter.done += len(chunk)
                self._meter.report(force=remote.size is not None and have == remote.size)
        if remote.size is not None and have < remote.size:
            # The body ended before the file did: a connection closed early.
            raise _Interrupted("the connection closed early")
        return have

    def _install(self, remote: _Remote) -> Path:
        """The cache entry for a blob in place: huggingface_hub writes the ref and the link."""
        from huggingface_hub import hf_hub_download

        try:
            path = hf_hub_download(
                remote.file.repo_id,
                remote.file.filename,
                cache_dir=hub_cache_dir(),
                endpoint=hub_endpoint(),
                etag_timeout=HUB_ETAG_TIMEOUT_S,
            )
        except Exception as exc:
            raise DownloadError(
                f"{remote.file.spec} was fetched but its cache entry could not be made: "
                f"{type(exc).__name__}: {exc}; try again (nothing is fetched twice)"
            ) from exc
        return Path(path)

    def _check_cancelled(self) -> None:
        if self._cancel.is_set():
            raise DownloadCancelled("the download was cancelled; its partial file is kept")


def _write_all(out: Any, data: bytes) -> None:
    """Write all of ``data`` to an unbuffered file (a raw write may write less)."""
    view = memoryview(data)
    while view:
        view = view[out.write(view) :]


class _Interrupted(Exception):
    """A transfer that stopped before the file's end; worth resuming."""


def _status(exc: Any) -> object:
    response = getattr(exc, "response", None)
    return getattr(response, "status_code", "?")


def _not_gguf(file: HubFile, head: bytes) -> str:
    return f"{file.spec} is not a GGUF model file: it begins with {head[:16]!r}, not {GGUF_MAGIC!r}"


def _check_gguf(path: Path, file: HubFile) -> None:
    """Refuse (and delete) a fetched file that is not a readable GGUF file."""
    from gguf import GGUFReader

    try:
        with open(path, "rb") as f:
            head = f.read(16)
        if not head.startswith(GGUF_MAGIC):
            raise DownloadError(_not_gguf(file, head))
        GGUFReader(path)
    except DownloadError:
        path.unlink(missing_ok=True)
        raise
    except Exception as exc:
        path.unlink(missing_ok=True)
        raise DownloadError(
            f"{file.spec} is not a valid GGUF file ({type(exc).__name__}: {exc})"
        ) from exc

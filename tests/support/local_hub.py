"""A Hugging Face hub on loopback: the few endpoints ``huggingface_hub`` downloads through.

Servers under test reach it through ``HF_ENDPOINT`` (which huggingface_hub honours):

- ``HEAD|GET /{owner}/{repo}/resolve/{revision}/{file}``: as the real hub answers for a
  large file, a 302 to a content URL carrying ``X-Repo-Commit``, ``X-Linked-Etag`` and
  ``X-Linked-Size``; 404 with ``X-Error-Code: RepoNotFound`` / ``EntryNotFound`` else;
- ``GET /cdn/{etag}``: the bytes, with ``Range`` (206 and ``Content-Range``), sent at
  ``rate`` bytes per second when set.

A test can hold the bytes at an offset (``pause_at``, then ``release``) to look at a
download midway without racing it, kill the server in the middle of a body (``kill``;
connections drop as in a crash) and start it again on the same port (``start``), and
read which ranges were asked for (``gets``).
"""

from __future__ import annotations

import contextlib
import hashlib
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

COMMIT = "0123456789abcdef0123456789abcdef01234567"
BODY_CHUNK = 16 * 1024


@dataclass
class HubEntry:
    """One file the hub serves."""

    data: bytes
    etag: str
    declared_size: int  # what HEAD announces (a test may make it lie)


@dataclass
class Get:
    """One GET of a file's bytes: where it started, and whether it was a Range request."""

    etag: str
    start: int
    ranged: bool


@dataclass
class _State:
    files: dict[str, HubEntry] = field(default_factory=dict)
    repos: set[str] = field(default_factory=set)
    gets: list[Get] = field(default_factory=list)
    rate: float | None = None
    pause_offset: int | None = None
    gate: threading.Event = field(default_factory=threading.Event)
    reached: threading.Event = field(default_factory=threading.Event)
    killed: threading.Event = field(default_factory=threading.Event)
    connections: set[socket.socket] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)


class LocalHub:
    """The hub's download endpoints on 127.0.0.1, in a thread of the test process."""

    def __init__(self, *, rate: float | None = None) -> None:
        self.state = _State(rate=rate)
        self.state.gate.set()
        self.port = 0
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The endpoint to put in ``HF_ENDPOINT``."""
        return f"http://127.0.0.1:{self.port}"

    def add(
        self, repo_id: str, filename: str, data: bytes, *, declared_size: int | None = None
    ) -> str:
        """Serve ``data`` as ``repo_id/filename``; the ``hf:`` spec naming it."""
        etag = hashlib.sha256(data).hexdigest()
        size = len(data) if declared_size is None else declared_size
        with self.state.lock:
            self.state.files[f"{repo_id}/{filename}"] = HubEntry(data, etag, size)
            self.state.repos.add(repo_id)
        return f"hf:{repo_id}/{filename}"

    def gets(self, etag: str | None = None) -> list[Get]:
        """The GETs of file bytes so far (of one file, when ``etag`` is given)."""
        with self.state.lock:
            return [g for g in self.state.gets if etag is None or g.etag == etag]

    def etag(self, repo_id: str, filename: str) -> str:
        """The ETag the hub gives ``repo_id/filename``."""
        return self.state.files[f"{repo_id}/{filename}"].etag

    # -- holding the bytes ---------------------------------------------------------

    def pause_at(self, offset: int) -> None:
        """Hold every body at ``offset`` bytes until ``release``; ``reached`` is set there."""
        self.state.reached.clear()
        self.state.pause_offset = offset
        self.state.gate.clear()

    def wait_reached(self, timeout: float = 60) -> None:
        """Block until a body has been held at the pause offset."""
        if not self.state.reached.wait(timeout):
            raise TimeoutError("no download reached the pause offset")

    def release(self) -> None:
        """Let held bodies go on, and hold no more."""
        self.state.pause_offset = None
        self.state.gate.set()

    # -- running -------------------------------------------------------------------

    def start(self) -> LocalHub:
        """Listen (again, on the same port after ``kill``)."""
        self.state.killed.clear()
        server = ThreadingHTTPServer(("127.0.0.1", self.port), _handler(self.state))
        server.daemon_threads = True
        self.port = server.server_address[1]
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def kill(self) -> None:
        """Stop at once, dropping every open connection mid-body, as a crash would."""
        self.state.killed.set()
        self.release()
        with self.state.lock:
            connections = list(self.state.connections)
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        self.stop()

    def stop(self) -> None:
        """Stop listening."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None


def _handler(state: _State) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

        def setup(self) -> None:
            super().setup()
            with state.lock:
                state.connections.add(self.connection)

        def finish(self) -> None:
            with state.lock:
                state.connections.discard(self.connection)
            with contextlib.suppress(OSError):
                super().finish()

        def do_HEAD(self) -> None:
            self._route(body=False)

        def do_GET(self) -> None:
            self._route(body=True)

        def _route(self, *, body: bool) -> None:
            path = self.path.split("?", 1)[0]
            if path.startswith("/cdn/"):
                self._content(path[len("/cdn/") :], body=body)
            elif "/resolve/" in path:
                self._resolve(path)
            else:
                self._empty(404)

        def _resolve(self, path: str) -> None:
            repo, _, rest = path.lstrip("/").partition("/resolve/")
            _revision, _, filename = rest.partition("/")
            with state.lock:
                entry = state.files.get(f"{repo}/{filename}")
                known_repo = repo in state.repos
            if entry is None:
                code = "EntryNotFound" if known_repo else "RepoNotFound"
                self._empty(404, {"X-Error-Code": code, "X-Error-Message": f"{code}: {path}"})
                return
            self._empty(
                302,
                {
                    # Another host, as the real hub redirects to its CDN: huggingface_hub
                    # then reads the metadata off this very answer.
                    "Location": f"http://localhost:{self.server.server_address[1]}/cdn/{entry.etag}",
                    "X-Repo-Commit": COMMIT,
                    "X-Linked-Etag": f'"{entry.etag}"',
                    "X-Linked-Size": str(entry.declared_size),
                    "ETag": f'"{entry.etag}"',
                },
            )

        def _content(self, etag: str, *, body: bool) -> None:
            with state.lock:
                entry = next((e for e in state.files.values() if e.etag == etag), None)
            if entry is None:
                self._empty(404)
                return
            data, start = entry.data, 0
            ranged = self.headers.get("Range", "").startswith("bytes=")
            if ranged:
                start = int(self.headers["Range"][len("bytes=") :].split("-", 1)[0])
                if start >= len(data):
                    self._empty(416, {"Content-Range": f"bytes */{len(data)}"})
                    return
            if body:
                with state.lock:
                    state.gets.append(Get(etag, start, ranged))
            self.send_response(206 if ranged else 200)
            if ranged:
                self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
            self.send_header("Content-Length", str(len(data) - start))
            self.send_header("Accept-Ranges", "bytes")
            self.send_header("ETag", f'"{entry.etag}"')
            self.end_headers()
            if body:
                self._send_slowly(data, start)

        def _send_slowly(self, data: bytes, offset: int) -> None:
            try:
                while offset < len(data) and not state.killed.is_set():
                    end = min(offset + BODY_CHUNK, len(data))
                    pause = state.pause_offset
                    if pause is not None and offset < pause <= end:
                        end = pause
                    if pause is not None and offset == pause:
                        state.reached.set()
                        state.gate.wait(0.1)
                        continue
                    self.wfile.write(data[offset:end])
                    self.wfile.flush()
                    if state.rate:
                        time.sleep((end - offset) / state.rate)
                    offset = end
            except OSError:
                pass  # the client went away, or kill() dropped the connection
            if state.killed.is_set():  # drop it from this side too, as a crash would
                self.close_connection = True
                with contextlib.suppress(OSError):
                    self.connection.shutdown(socket.SHUT_RDWR)

        def _empty(self, status: int, headers: dict[str, str] | None = None) -> None:
            self.send_response(status)
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.send_header("Content-Length", "0")
            self.end_headers()

    return Handler

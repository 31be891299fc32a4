"""``StreamClient``: the HTTP/1.1 client of a turn's hot path, one POST and its SSE lines.

Every turn over a remote engine is one ``POST`` whose answer streams a line per token,
and on a continued turn its cost sits between the user's request and their first token.
httpx's async client (httpcore's connection pool, its locks and request and response
models) took about 1.5 ms more than the bare asyncio exchange to the first chunk of a
llama-server stream (median of 70, 2 cores); this client is that exchange and no more:

- a request is its head and JSON body written at once on an idle kept-alive
  connection (or a new one); the answer's status and headers are read, then the body,
  chunked, of a known length, or to the close;
- a connection goes back to the idle ones only after its body was read to the end and
  the remote did not ask to close it; one left early (the client went away, an error) is
  closed, which is how the remote learns to stop generating;
- a connection that was idle may have been closed by the remote meanwhile: a request
  that gets no byte of answer on one is sent once more on a new connection;
- llama-server closes every connection that carried a streamed answer, right after
  it; so that the next turn does not wait for a TCP connect (and a TLS handshake, for
  an ``https`` remote), a connection the remote closes after answering on it is
  replaced at once by one spare, opened in the background (a spare the remote closes
  unused, when its keep-alive runs out, is not replaced: at most one per answer);
- a stream silent for ``read_timeout`` seconds is aborted by one timer per stream (no
  task per read);
- failures are httpx's exception types (``ConnectError``, ``ConnectTimeout``,
  ``ReadTimeout``, ``RemoteProtocolError``, ``ReadError``), so ``RemoteEngine`` maps them
  to "unavailable" in one place whichever client raised them.

Remotes are reached directly: proxy environment variables are not consulted (the
metadata client is built with ``trust_env=False`` to match).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx

IDLE_KEPT = 32  # idle kept-alive connections per remote (as the httpx client had)


class _IdleClosed(Exception):
    """The remote had closed the idle connection a request was sent on."""


@dataclass
class _Connection:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    reused: bool = False
    watch: asyncio.Task[None] | None = None  # while idle: waits for the remote's close

    def usable(self) -> bool:
        return not self.writer.transport.is_closing() and not self.reader.at_eof()

    async def unwatch(self) -> None:
        """Stop waiting for the remote's close, so that a request can read here."""
        if self.watch is not None:
            self.watch.cancel()
            await asyncio.wait({self.watch})  # its reader is free only once it has ended
            self.watch = None

    def close(self) -> None:
        self.writer.transport.abort()


@dataclass
class StreamResponse:
    """The status and headers of an answer, and its body to read once."""

    status: int
    headers: dict[str, str]  # names lower-cased
    _conn: _Connection
    _watch: _SilenceWatch
    complete: bool = field(default=False, init=False)  # the body was read to its end

    async def lines(self) -> AsyncIterator[str]:
        """The body's lines, without their line ends (as UTF-8 text)."""
        pending = b""
        async for data in self._chunks():
            pending += data
            if b"\n" not in data:
                continue
            *whole, pending = pending.split(b"\n")
            for line in whole:
                yield line.rstrip(b"\r").decode("utf-8", "replace")
        if pending:
            yield pending.rstrip(b"\r").decode("utf-8", "replace")

    async def read(self) -> bytes:
        """The whole body."""
        return b"".join([data async for data in self._chunks()])

    async def _chunks(self) -> AsyncIterator[bytes]:
        reader, watch = self._conn.reader, self._watch
        try:
            if self.headers.get("transfer-encoding", "").lower() == "chunked":
                while size := int((await reader.readuntil(b"\r\n")).split(b";")[0], 16):
                    data = await reader.readexactly(size + 2)
                    watch.heard()
                    yield data[:-2]
                await reader.readuntil(b"\r\n")  # the trailer's end (no trailers are sent)
            elif "content-length" in self.headers:
                yield await reader.readexactly(int(self.headers["content-length"]))
            else:
                yield await reader.read()  # to the close
                self._conn.close()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as err:
            raise watch.failure(err, "the answer's body ended early or was malformed") from err
        except OSError as err:
            raise watch.failure(err, "the connection failed") from err
        self.complete = True


class _SilenceWatch:
    """Aborts a connection once nothing was heard on it for ``timeout`` seconds."""

    def __init__(self, conn: _Connection, timeout: float) -> None:
        self._conn, self._timeout = conn, timeout
        self._loop = asyncio.get_running_loop()
        self._last = self._loop.time()
        self._timer = self._loop.call_at(self._last + timeout, self._check)
        self.expired = False

    def heard(self) -> None:
        self._last = self._loop.time()

    def _check(self) -> None:
        due = self._last + self._timeout
        if self._loop.time() < due:
            self._timer = self._loop.call_at(due, self._check)
            return
        self.expired = True
        self._conn.close()

    def cancel(self) -> None:
        self._timer.cancel()

    def failure(self, err: Exception, what: str) -> httpx.TransportError:
        if self.expired:
            return httpx.ReadTimeout(f"nothing was heard for {self._timeout:g} s")
        if isinstance(err, OSError):
            return httpx.ReadError(f"{what}: {err}")
        return httpx.RemoteProtocolError(what)


class StreamClient:
    """POSTs JSON to one remote over kept-alive connections of the running event loop."""

    def __init__(
        self,
        base_url: str,
        headers: dict[str, str],
        *,
        connect_timeout: float,
        read_timeout: float,
    ) -> None:
        parts = urlsplit(base_url)
        self._secure = parts.scheme == "https"
        self._host = parts.hostname or "localhost"
        self._port = parts.port or (443 if self._secure else 80)
        self._prefix = parts.path.rstrip("/")
        authority = parts.netloc.rsplit("@", 1)[-1]
        extra = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
        self._head = f"Host: {authority}\r\nContent-Type: application/json\r\n{extra}"
        self._connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self._idle: list[_Connection] = []
        self._spare: asyncio.Task[None] | None = None  # a connection being opened ahead
        self.opened = 0  # connections made, over the client's life

    @property
    def idle(self) -> int:
        """How many kept-alive connections wait for the next request."""
        return len(self._idle)

    @contextlib.asynccontextmanager
    async def post(
        self, path: str, body: Any, *, timeout: float | None = None
    ) -> AsyncIterator[StreamResponse]:
        """POST ``body`` as JSON to ``path``; the answer, its body to be read inside."""
        payload = json.dumps(body, separators=(",", ":")).encode()
        request = (
            f"POST {self._prefix}{path} HTTP/1.1\r\n{self._head}"
            f"Content-Length: {len(payload)}\r\n\r\n"
        ).encode() + payload
        response = await self._exchange(request, timeout or self.read_timeout)
        try:
            yield response
        finally:
            response._watch.cancel()
            if response.complete and response.headers.get("connection", "").lower() != "close":
                self._keep(response._conn)
            else:
                response._conn.close()  # left unread: the remote sees the client go

    async def _exchange(self, request: bytes, timeout: float) -> StreamResponse:
        if not self._idle and self._spare is not None and not self._spare.done():
            await asyncio.wait({self._spare})  # already under way: sooner than another
        conn = await self._idle_connection() or await self._connect()
        try:
            return await self._send(conn, request, timeout)
        except _IdleClosed:
            return await self._send(await self._connect(), request, timeout)

    async def _send(self, conn: _Connection, request: bytes, timeout: float) -> StreamResponse:
        watch = _SilenceWatch(conn, timeout)
        try:
            conn.writer.write(request)
            await conn.writer.drain()
            head = await conn.reader.readuntil(b"\r\n\r\n")
            watch.heard()
            status, headers = _parse_head(head)
        except BaseException as err:  # cancelled too: the connection is not left half-used
            watch.cancel()
            conn.close()
            if isinstance(err, asyncio.IncompleteReadError) and not err.partial and conn.reused:
                raise _IdleClosed from err
            if isinstance(err, ValueError):
                raise httpx.RemoteProtocolError(f"a malformed answer: {err}") from err
            if isinstance(err, (asyncio.IncompleteReadError, asyncio.LimitOverrunError, OSError)):
                raise watch.failure(err, "the remote sent no answer") from err
            raise
        return StreamResponse(status, headers, conn, watch)

    async def _idle_connection(self) -> _Connection | None:
        while self._idle:
            conn = self._idle.pop()
            await conn.unwatch()
            if conn.usable():
                conn.reused = True
                return conn
            conn.close()
        return None

    async def _connect(self) -> _Connection:
        context = ssl.create_default_context() if self._secure else None
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(self._host, self._port, ssl=context),
                self._connect_timeout,
            )
        except asyncio.TimeoutError as err:
            raise httpx.ConnectTimeout(f"no connection in {self._connect_timeout:g} s") from err
        except OSError as err:
            raise httpx.ConnectError(str(err) or type(err).__name__) from err
        self.opened += 1
        return _Connection(reader, writer)

    def _keep(self, conn: _Connection, *, replace: bool = True) -> None:
        """Keep ``conn`` for the next request; ``replace``: by a spare if the remote closes it."""
        if len(self._idle) < IDLE_KEPT and conn.usable():
            conn.reused = False
            self._idle.append(conn)
            conn.watch = asyncio.get_running_loop().create_task(self._watch(conn, replace))
        else:
            conn.close()

    async def _watch(self, conn: _Connection, replace: bool) -> None:
        """Drop an idle connection once the remote closes it; maybe open a spare."""
        with contextlib.suppress(OSError):
            await conn.reader.read(1)  # its end (or a byte nobody asked for: dropped too)
        if conn not in self._idle:
            return
        self._idle.remove(conn)
        conn.watch = None
        conn.close()
        if replace and not self._idle and (self._spare is None or self._spare.done()):
            self._spare = asyncio.get_running_loop().create_task(self._open_spare())

    async def _open_spare(self) -> None:
        try:
            conn = await self._connect()
        except httpx.TransportError:
            return  # the next request connects, and reports the failure, itself
        self._keep(conn, replace=False)  # closed unused (its keep-alive ran out): not replaced

    async def aclose(self) -> None:
        """Close the idle connections (streams in progress close with their requests)."""
        if self._spare is not None:
            self._spare.cancel()
            await asyncio.wait({self._spare})
        while self._idle:
            conn = self._idle.pop()
            await conn.unwatch()
            conn.close()


def _parse_head(head: bytes) -> tuple[int, dict[str, str]]:
    """The status and the headers (names lower-cased) of an answer's head."""
    status_line, *lines = head.decode("latin-1").split("\r\n")
    version, code, *_ = status_line.split(" ", 2)
    if not version.startswith("HTTP/1."):
        raise ValueError(f"not HTTP/1.x: {status_line!r}")
    headers: dict[str, str] = {}
    for line in lines:
        if line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    if version == "HTTP/1.0" and headers.get("connection", "").lower() != "keep-alive":
        headers["connection"] = "close"
    return int(code), headers

"""The hot path's HTTP client against a real socket peer that answers exact bytes.

Each case starts an asyncio TCP server in the test's own loop that reads one request
head and body and answers what the case scripts, so framing (chunked, a length, to the
close), keep-alive, a remote closing an idle connection, silence and refusal are each
shown on the wire. The real remotes (llama-server, vLLM) are the other tests here.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable

import httpx
import pytest

from jupyter_superfluid.engine.remote.http_stream import StreamClient

Answer = Callable[[asyncio.StreamReader, asyncio.StreamWriter, dict], Awaitable[bool]]


async def _read_request(reader: asyncio.StreamReader) -> dict | None:
    """One request's line, headers and JSON body; None at the connection's end."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    line, *fields = head.decode().split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (f.partition(":") for f in fields if f)}
    body = await reader.readexactly(int(headers["content-length"]))
    return {"line": line, "headers": headers, "body": json.loads(body)}


class Peer:
    """A server whose connections answer each request with ``answer`` (False: close)."""

    def __init__(self, answer: Answer, keep_alive: float | None = None) -> None:
        self.answer = answer
        self.keep_alive = keep_alive  # seconds a connection may wait for a request
        self.requests: list[dict] = []
        self.connections = 0
        self.closed_by_client = asyncio.Event()

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while request := await asyncio.wait_for(_read_request(reader), self.keep_alive):
                request["connection"] = self.connections
                self.requests.append(request)
                if not await self.answer(reader, writer, request):
                    break
            else:
                self.closed_by_client.set()
        except asyncio.TimeoutError:
            pass  # its keep-alive ran out: closed unused
        writer.close()

    async def __aenter__(self) -> str:
        self.server = await asyncio.start_server(self.serve, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}/base"

    async def __aexit__(self, *exc: object) -> None:
        self.server.close()


def _chunked(*parts: bytes) -> bytes:
    body = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts)
    return b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + body + b"0\r\n\r\n"


def _client(url: str, read_timeout: float = 5.0) -> StreamClient:
    headers = {"Authorization": "Bearer k"}
    return StreamClient(url, headers, connect_timeout=2.0, read_timeout=read_timeout)


def test_sse_lines_over_chunks_split_anywhere_and_one_connection_kept():
    async def answer(reader, writer, request) -> bool:
        # Lines split across chunks, CRLF and LF ends, a multi-byte character split too.
        euro = "€".encode()
        writer.write(_chunked(b'data: {"a"', b": 1}\r\n\r\ndata: " + euro[:1], euro[1:] + b"\n"))
        return True

    async def run() -> tuple[list[list[str]], Peer, StreamClient]:
        peer = Peer(answer)
        async with peer as url:
            client = _client(url)
            seen = []
            for _ in range(3):
                async with client.post("/completion", {"prompt": [1, 2]}) as response:
                    assert response.status == 200
                    seen.append([line async for line in response.lines()])
            await client.aclose()
            await asyncio.wait_for(peer.closed_by_client.wait(), 5)
        return seen, peer, client

    seen, peer, client = asyncio.run(run())
    assert seen == [['data: {"a": 1}', "", "data: €"]] * 3
    assert (peer.connections, client.opened) == (1, 1)
    first = peer.requests[0]
    assert first["line"] == "POST /base/completion HTTP/1.1"
    assert first["headers"]["authorization"] == "Bearer k"
    assert first["headers"]["content-type"] == "application/json"
    assert first["body"] == {"prompt": [1, 2]}


def test_a_body_of_known_length_and_one_read_to_the_close():
    async def answer(reader, writer, request) -> bool:
        if request["body"]["n"] == 1:
            writer.write(b'HTTP/1.1 400 Bad Request\r\nContent-Length: 7\r\n\r\n{"e":1}')
            return True
        writer.write(b"HTTP/1.0 200 OK\r\n\r\nto the end")
        return False

    async def run() -> list[tuple[int, bytes]]:
        async with Peer(answer) as url:
            client = _client(url)
            got = []
            for n in (1, 2, 1):
                async with client.post("/x", {"n": n}) as response:
                    got.append((response.status, await response.read()))
            assert client.opened == 2  # the HTTP/1.0 answer's connection was not kept
            return got

    assert asyncio.run(run()) == [(400, b'{"e":1}'), (200, b"to the end"), (400, b'{"e":1}')]


async def _until(condition: Callable[[], bool]) -> None:
    """Wait (at most 5 s) for ``condition``: what the loop does in the background."""
    for _ in range(500):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the condition was not reached in 5 s")


def test_a_request_cut_off_by_an_idle_connections_close_is_sent_again_on_a_new_one():
    async def answer(reader, writer, request) -> bool:
        first = sum(r["connection"] == request["connection"] for r in peer.requests) == 1
        if first:
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        return first  # the second request on a connection meets its close, unanswered

    peer = Peer(answer)

    async def run() -> list[bytes]:
        async with peer as url:
            client = _client(url)
            got = []
            for n in range(3):
                async with client.post("/x", {"n": n}) as response:
                    got.append(await response.read())
        return got

    assert asyncio.run(run()) == [b"ok"] * 3
    sent = [(r["body"]["n"], r["connection"]) for r in peer.requests]
    assert sent == [(0, 1), (1, 1), (1, 2), (2, 2), (2, 3)]


def test_a_connection_the_remote_closes_after_answering_is_replaced_before_the_next_request():
    async def answer(reader, writer, request) -> bool:
        writer.write(_chunked(b"data: {}\n\n"))  # a streamed answer, then closed (llama-server)
        await writer.drain()
        return False

    peer = Peer(answer)

    async def run() -> list[tuple[int, int]]:
        async with peer as url:
            client = _client(url)
            seen = []  # connections opened before each request, and by its answer
            for n in range(3):
                before = client.opened
                async with client.post("/x", {"n": n}) as response:
                    at_answer = client.opened
                    assert [line async for line in response.lines()] == ["data: {}", ""]
                # The remote closed it: a spare reaches the remote and waits, idle.
                await _until(lambda n=n: peer.connections == n + 2 and client.idle == 1)
                seen.append((before, at_answer))
            await client.aclose()
        return seen

    # Only the first request waited for a connect; each later one went on its spare.
    assert asyncio.run(run()) == [(0, 1), (2, 2), (3, 3)]
    assert [(r["body"]["n"], r["connection"]) for r in peer.requests] == [(0, 1), (1, 2), (2, 3)]


def test_a_spare_the_remote_closes_unused_is_not_replaced():
    async def answer(reader, writer, request) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        await writer.drain()
        return False

    peer = Peer(answer, keep_alive=0.2)

    async def run() -> tuple[int, int, bytes]:
        async with peer as url:
            client = _client(url)
            async with client.post("/x", {"n": 0}) as response:
                await response.read()
            await _until(lambda: peer.connections == 2)  # the spare reached the peer
            await _until(lambda: client.idle == 0 and not peer.requests[1:])  # closed unused
            await asyncio.sleep(0.5)  # time enough for a replacement, were there one
            opened = client.opened
            async with client.post("/x", {"n": 1}) as response:
                body = await response.read()
            return opened, client.opened, body

    assert asyncio.run(run()) == (2, 3, b"ok")


def test_leaving_a_stream_early_closes_its_connection():
    gone: list[bool] = []

    async def answer(reader, writer, request) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nhello\n\r\n")
        await writer.drain()
        gone.append(await reader.read() == b"")  # until the client goes
        return False

    async def run() -> tuple[str, bool, int]:
        async with Peer(answer) as url:
            client = _client(url)
            async with client.post("/x", {}) as response:
                line = await anext(aiter(response.lines()))
            for _ in range(200):  # the peer's read returns once the client closed
                if gone:
                    break
                await asyncio.sleep(0.01)
            return line, response.complete, client.idle

    assert asyncio.run(run()) == ("hello", False, 0)
    assert gone == [True]


def test_a_silent_remote_is_a_read_timeout_and_a_dead_one_a_connect_error():
    async def answer(reader, writer, request) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")
        await asyncio.sleep(30)  # then nothing
        return False

    async def silent() -> list[str]:
        async with Peer(answer) as url:
            client = _client(url, read_timeout=0.3)
            lines = []
            async with client.post("/x", {}) as response:
                async for line in response.lines():
                    lines.append(line)
            return lines

    with pytest.raises(httpx.ReadTimeout, match=r"nothing was heard for 0\.3 s"):
        asyncio.run(silent())

    async def dead() -> None:
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        server.close()
        await server.wait_closed()
        async with _client(f"http://127.0.0.1:{port}").post("/x", {}):
            pass

    with pytest.raises(httpx.ConnectError):
        asyncio.run(dead())


@pytest.mark.parametrize(
    ("answer_bytes", "error"),
    [
        (b"SPDY/3 200 OK\r\n\r\n", "a malformed answer"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "malformed"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", "ended early"),
    ],
)
def test_malformed_or_cut_answers_are_protocol_errors(answer_bytes: bytes, error: str):
    async def answer(reader, writer, request) -> bool:
        writer.write(answer_bytes)
        await writer.drain()
        return False

    async def run() -> None:
        async with Peer(answer) as url, _client(url).post("/x", {}) as response:
            await response.read()

    with pytest.raises(httpx.RemoteProtocolError, match=error):
        asyncio.run(run())

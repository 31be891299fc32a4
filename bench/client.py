"""Streaming HTTP clients that time one request: TTFT, token timings, usage.

TTFT is the time from sending the request to the first non-empty text delta
(``response.output_text.delta`` for Responses, ``choices[0].delta.content``
for chat completions). Both clients read raw SSE with httpx, so the
measurement is the same for every server compared.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx


@dataclass
class StreamResult:
    """What one streamed request produced and when."""

    ttft: float | None = None  # seconds to the first text delta
    total: float = 0.0  # seconds to the end of the stream
    first_delta: float | None = None  # monotonic time of the first text delta
    last_delta: float | None = None  # monotonic time of the last text delta
    deltas: int = 0
    text: str = ""
    output_tokens: int | None = None
    cached_tokens: int | None = None
    input_tokens: int | None = None
    response_id: str | None = None
    status: str | None = None  # Responses status, or the chat finish_reason
    warm_header: int | None = None
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """Whether the stream ran to its end without an error."""
        return self.error is None and self.status is not None

    def decode_rate(self) -> float | None:
        """Tokens per second between the first and the last text delta."""
        if not self.output_tokens or self.first_delta is None or self.last_delta is None:
            return None
        span = self.last_delta - self.first_delta
        return (self.output_tokens - 1) / span if span > 0 else None


async def sse_events(response: httpx.Response) -> AsyncIterator[tuple[str | None, str]]:
    """(event name, data) pairs of an SSE body."""
    event: str | None = None
    data: list[str] = []
    async for line in response.aiter_lines():
        if not line:
            if data:
                yield event, "\n".join(data)
            event, data = None, []
        elif line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].lstrip())
    if data:
        yield event, "\n".join(data)


def _delta(result: StreamResult, started: float, text: str) -> None:
    """Record one text delta."""
    now = time.monotonic()
    if result.first_delta is None:
        result.first_delta, result.ttft = now, now - started
    result.last_delta = now
    result.deltas += 1
    result.text += text


def _take_response(result: StreamResult, body: dict[str, Any]) -> None:
    """Record a final Responses object (usage, id, status)."""
    result.response_id = body.get("id")
    result.status = body.get("status")
    usage = body.get("usage") or {}
    result.output_tokens = usage.get("output_tokens")
    result.input_tokens = usage.get("input_tokens")
    result.cached_tokens = (usage.get("input_tokens_details") or {}).get("cached_tokens")


OnEvent = Callable[[StreamResult, float, dict[str, Any]], None]


async def _timed_stream(
    client: httpx.AsyncClient,
    url: str,
    body: dict[str, Any],
    headers: dict[str, str] | None,
    on_event: OnEvent,
) -> StreamResult:
    """POST ``body`` (stream on) and time its SSE stream; ``on_event`` reads each event.

    The events end at ``[DONE]`` (as OpenAI and OpenResponses write it) or at the body's
    end. The body is read to its end, as the openai SDK does over HTTP/1.1, so that a
    server that keeps the connection alive serves the next request on it.
    """
    result = StreamResult()
    started = time.monotonic()
    try:
        async with client.stream("POST", url, json={**body, "stream": True}, headers=headers) as r:
            if r.status_code != 200:
                result.error = f"HTTP {r.status_code}: {(await r.aread())[:300]!r}"
                return result
            warm = r.headers.get("x-superfluid-warm")
            result.warm_header = int(warm) if warm is not None else None
            done = False
            async for _, data in sse_events(r):
                done = done or data.strip() == "[DONE]"
                if not done:
                    on_event(result, started, json.loads(data))
    except httpx.HTTPError as err:
        result.error = f"{type(err).__name__}: {err}"
    result.total = time.monotonic() - started
    return result


def _responses_event(result: StreamResult, started: float, event: dict[str, Any]) -> None:
    """Record one Responses streaming event."""
    kind = event.get("type")
    if kind == "response.output_text.delta" and event.get("delta"):
        _delta(result, started, event["delta"])
    elif kind in ("response.completed", "response.incomplete", "response.failed"):
        _take_response(result, event["response"])
    elif kind == "error":
        result.error = json.dumps(event)[:300]


def _chat_chunk(result: StreamResult, started: float, chunk: dict[str, Any]) -> None:
    """Record one chat completions chunk."""
    choice = (chunk.get("choices") or [{}])[0]
    content = (choice.get("delta") or {}).get("content")
    if content:
        result.extra["chunks"] = result.extra.get("chunks", 0) + 1
        _delta(result, started, content)
    if choice.get("finish_reason"):
        result.status = choice["finish_reason"]
    usage = chunk.get("usage")  # the last chunk, with stream_options.include_usage
    if usage:
        result.input_tokens = usage.get("prompt_tokens")
        result.cached_tokens = (usage.get("prompt_tokens_details") or {}).get("cached_tokens")


async def stream_response(
    client: httpx.AsyncClient, url: str, body: dict[str, Any], headers: dict[str, str] | None = None
) -> StreamResult:
    """POST ``body`` (stream on) to a Responses endpoint ``url`` and time it."""
    return await _timed_stream(client, url, body, headers, _responses_event)


async def stream_chat(
    client: httpx.AsyncClient, url: str, body: dict[str, Any], headers: dict[str, str] | None = None
) -> StreamResult:
    """POST ``body`` (stream on) to a chat completions endpoint ``url`` and time it."""
    result = await _timed_stream(client, url, body, headers, _chat_chunk)
    if result.status == "length":  # every requested token came (the end token is banned)
        result.output_tokens = body.get("max_tokens")
    result.extra.setdefault("chunks", 0)
    return result


async def stream_text(
    client: httpx.AsyncClient,
    url: str,
    body: dict[str, Any],
    text_of: Callable[[dict[str, Any]], str],
    headers: dict[str, str] | None = None,
) -> StreamResult:
    """POST ``body`` (stream on) to a text-streaming endpoint and time it.

    ``text_of(chunk)`` gives a chunk's text (``choices[0].text`` for ``/v1/completions``,
    ``content`` for llama-server's ``/infill``).
    """

    def on_chunk(result: StreamResult, started: float, chunk: dict[str, Any]) -> None:
        text = text_of(chunk)
        if text:
            _delta(result, started, text)

    result = await _timed_stream(client, url, body, headers, on_chunk)
    if result.error is None:
        result.status = "done"
    return result


def completion_text(chunk: dict[str, Any]) -> str:
    """The text of one ``/v1/completions`` chunk."""
    return str((chunk.get("choices") or [{}])[0].get("text") or "")


def infill_text(chunk: dict[str, Any]) -> str:
    """The text of one llama-server ``/infill`` (or ``/completion``) chunk."""
    return str(chunk.get("content") or "")


def new_client(timeout: float = 600) -> httpx.AsyncClient:
    """An async HTTP client for loopback servers (no pool limit, long timeouts)."""
    limits = httpx.Limits(max_connections=64, max_keepalive_connections=64)
    return httpx.AsyncClient(timeout=timeout, limits=limits, trust_env=False)

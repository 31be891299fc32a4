"""The one SSE pump of every protocol: batches of events in, one flush per wake-up out.

A protocol hands ``pump`` an async iterator of event batches (its encoder's
output) and, for errors after the stream began, the events its error shape
needs. The pump runs ``before_first`` once, while the headers can still be set
(``web.answer`` sets ``x-superfluid-warm`` there); writes every event that is
ready and flushes once per event-loop wake-up (``SseWriter``: one flush in
flight at a time, as tornado needs); and cancels the generation when the client
goes away (closing the iterator stops the engine at its next token).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from tornado import web
from tornado.iostream import StreamClosedError

from jupyter_superfluid.errors import APIError

log = logging.getLogger(__name__)

PACE_BYTES = 1 << 16  # past this much unflushed output the producer waits for the client


@dataclass(frozen=True)
class SSE:
    """One server-sent event: its data, and an event name and id where the protocol has them."""

    data: str
    event: str | None = None
    id: int | None = None

    @classmethod
    def json(cls, data: Any, event: str | None = None, id: int | None = None) -> SSE:
        """An event whose data is ``data`` as JSON."""
        return cls(json.dumps(data), event, id)

    def encode(self) -> str:
        """The event's lines, ending with the blank line."""
        head = f"id: {self.id}\n" if self.id is not None else ""
        if self.event is not None:
            head += f"event: {self.event}\n"
        return f"{head}data: {self.data}\n\n"


class SseWriter:
    """Writes events at once and flushes once per loop wake-up, one flush in flight."""

    def __init__(self, handler: web.RequestHandler, on_gone: Callable[[], None]) -> None:
        self.handler = handler
        self.on_gone = on_gone
        self.pending = 0  # bytes written since the last flush began
        self.scheduled = False
        self.inflight = False
        self.gone = False
        self.drained = asyncio.Event()
        self.drained.set()

    def write(self, events: list[SSE]) -> None:
        """Queue ``events``; the flush follows when this wake-up's work is done."""
        if self.gone or not events:
            return
        chunk = "".join(e.encode() for e in events)
        self.handler.write(chunk)
        self.pending += len(chunk)
        self.drained.clear()
        if not self.scheduled and not self.inflight:
            self.scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)

    async def pace(self) -> None:
        """Wait for the client when too much output is waiting for it."""
        if self.pending > PACE_BYTES and not self.gone:
            await self.drained.wait()

    async def flush_now(self) -> None:
        """Send what is written (and the headers) now."""
        self.scheduled = True
        self._flush()
        await self.drained.wait()

    def _flush(self) -> None:
        self.scheduled = False
        if self.gone or self.inflight or self.handler._finished:
            return
        self.inflight, self.pending = True, 0
        try:
            future = self.handler.flush()
        except StreamClosedError:
            self._lost()
            return
        future.add_done_callback(self._flushed)

    def _flushed(self, future: asyncio.Future[None]) -> None:
        self.inflight = False
        if future.cancelled() or future.exception() is not None:
            self._lost()
            return
        if self.pending:
            self._flush()  # written while the last flush was on its way
        else:
            self.drained.set()

    def _lost(self) -> None:
        self.gone = True
        self.drained.set()
        self.on_gone()


async def pump(
    handler: web.RequestHandler,
    batches: AsyncIterator[list[SSE]],
    *,
    before_first: Callable[[], None] | None = None,
    on_error: Callable[[APIError], list[SSE]] | None = None,
    headers_first: bool = False,
) -> None:
    """Stream ``batches`` as SSE until they end, the client leaves, or an error ends them.

    An error before anything was sent propagates (the handler answers it in
    its protocol's shape); after that, ``on_error`` gives the events that end
    the stream. ``headers_first`` sends the headers before the first event.
    """
    task = asyncio.current_task()

    def cancel() -> None:
        if task is not None:
            task.cancel()  # the client left: closing the batches stops the work

    writer = SseWriter(handler, cancel)
    handler.__dict__.setdefault("_on_close", []).append(cancel)
    handler.set_header("Content-Type", "text/event-stream; charset=utf-8")
    handler.set_header("Cache-Control", "no-cache")
    handler.set_header("X-Accel-Buffering", "no")
    started = False
    try:
        if headers_first:
            await writer.flush_now()
        async for batch in batches:
            if not started and before_first is not None and not handler._headers_written:
                before_first()
            started = True
            writer.write(batch)
            await writer.pace()
    except asyncio.CancelledError:
        pass  # the client went away: closing the batches stopped the work
    except Exception as err:
        if not handler._headers_written:
            raise  # nothing sent yet: answered in the protocol's error shape
        if not isinstance(err, APIError):
            log.exception("superfluid: a stream failed")
            err = APIError("internal error", status=500, code="internal_error")
        if on_error is not None:
            writer.write(on_error(err))
    finally:
        await batches.aclose()  # type: ignore[attr-defined]
    if not handler._finished:
        handler.finish()

"""LMSP's numbered events as server-sent events, and the answers of its three streams.

A response streamed from its POST, an idempotent retry's replay of one, and a
task's events (replayed, then followed) are each an ``Answer`` of SSE batches:
every event carries its sequence number as the SSE id, and an error after the
stream began ends it with an ``error`` event (the encoder's, numbered, where
the stream has one; else unnumbered).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Callable
from typing import Any

from jupyter_superfluid.errors import APIError
from jupyter_superfluid.lmsp.events import Stamped
from jupyter_superfluid.lmsp.problems import problem
from jupyter_superfluid.web.answer import Answer
from jupyter_superfluid.web.sse import SSE


def sse_batch(events: list[Stamped]) -> list[SSE]:
    """Numbered LMSP events as server-sent events."""
    return [SSE.json(data, event=name, id=number) for number, name, data in events]


def error_event(err: APIError) -> list[Stamped]:
    """The unnumbered ``error`` event of a stream that is not one response's own."""
    return [(None, "error", {"error": problem(err)})]


def events_answer(
    batches: AsyncIterator[list[Stamped]],
    *,
    warm: Callable[[], int] | None = None,
    on_error: Callable[[APIError], list[Stamped]] = error_event,
    headers_first: bool = False,
) -> Answer:
    """An answer streaming ``batches`` of numbered LMSP events."""
    return Answer(
        batches=_as_sse(batches),
        warm=warm,
        on_error=lambda err: sse_batch(on_error(err)),
        headers_first=headers_first,
    )


def replayed(events: list[Any]) -> Answer:
    """A recorded stream, answered again to an idempotent retry."""
    return events_answer(_once([tuple(e) for e in events]))


def followed(events: AsyncIterator[Any]) -> Answer:
    """A task's events (the store's ``TaskEvent``s); its headers go out before the first."""
    return events_answer(_numbered(events), headers_first=True)


async def _as_sse(batches: AsyncIterator[list[Stamped]]) -> AsyncGenerator[list[SSE], None]:
    try:
        async for batch in batches:
            yield sse_batch(batch)
    finally:
        await batches.aclose()  # type: ignore[attr-defined]


async def _once(events: list[Any]) -> AsyncGenerator[list[Stamped], None]:
    yield events


async def _numbered(events: AsyncIterator[Any]) -> AsyncGenerator[list[Stamped], None]:
    async for event in events:
        yield [(event.seq, event.event, event.data)]

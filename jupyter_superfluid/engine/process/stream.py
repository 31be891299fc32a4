"""One generation's events as they arrive from the engine process, for its one consumer.

The control socket's reader pushes a frame's events for a generation in one go;
its consumer wakes once per frame, not once per event.
"""

from __future__ import annotations

import asyncio
from collections import deque

from jupyter_superfluid.engine.base import EngineError, EngineEvent


class Stream:
    """One generation's events as they arrive, for its one consumer."""

    __slots__ = ("ended", "events", "tokens", "waiter")

    def __init__(self) -> None:
        self.events: deque[EngineEvent | EngineError] = deque()
        self.tokens = 0  # TokenGenerated events so far
        self.ended = False  # its last event came: the process owes it nothing more
        self.waiter: asyncio.Future[None] | None = None

    def push(self, event: EngineEvent | EngineError) -> None:
        """Queue an event and wake the consumer (once per batch of pushes)."""
        self.events.append(event)
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def wait(self) -> None:
        """Until something is queued."""
        self.waiter = asyncio.get_running_loop().create_future()
        try:
            await self.waiter
        finally:
            self.waiter = None

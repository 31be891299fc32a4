"""One way to answer a request that may stream: a JSON body, or event batches as SSE.

A protocol's service returns an ``Answer``; ``ProtocolHandler.answer`` sends it,
a body as JSON and batches through the one SSE pump (``web.sse``). The
``x-superfluid-warm`` header (the prompt tokens the KV cache served) is set here
and nowhere else: for a body before it is written, for a stream before its
first event goes out.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from tornado import web

from jupyter_superfluid.errors import APIError
from jupyter_superfluid.web.sse import SSE

WARM_HEADER = "x-superfluid-warm"
ErrorEvents = Callable[[APIError], list[SSE]]
"""The events that end a stream on an error after it began, in the protocol's shape."""


@dataclass
class Answer:
    """A JSON ``body``, or ``batches`` of server-sent events; ``warm`` once it is known."""

    body: Any = None
    batches: AsyncIterator[list[SSE]] | None = None
    warm: Callable[[], int] | None = None  # read when the headers are about to go out
    on_error: ErrorEvents | None = None
    status: int = 200
    headers_first: bool = False  # a follower's stream: its headers go out before any event

    def set_warm(self, handler: web.RequestHandler) -> None:
        """Set ``x-superfluid-warm`` on ``handler``, where this answer knows it."""
        if self.warm is not None:
            handler.set_header(WARM_HEADER, str(self.warm()))

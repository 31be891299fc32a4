"""WebSocket mode of ``/v1/responses`` (OpenResponses 2026-04-24, OpenAI's WebSocket mode).

A WebSocket upgrade of ``GET /v1/responses`` is authenticated as every request
is (``web.base``: before anything else; a refused upgrade is a 401 or 403), and
then counted against ``websocket_connections`` per key (429 past it). The
client sends ``{"type": "response.create", ...a create body...}`` text frames
(without ``stream``, ``stream_options`` or ``background``); each runs as a
streamed create and the server sends the same events SSE would, in order, with
their ``sequence_number`` s, as JSON text frames. Responses run one after the
other on a connection.

A ``store: false`` response stays continuable on its connection: the
connection keeps the continuation of its latest unstored turn (the engine keeps
its KV state), so ``previous_response_id`` with only the new input continues it
warm. Another connection, or this one after a reconnect, does not know it
(``previous_response_not_found``); a stored response continues as over HTTP. A
continuation that fails evicts the connection's state for it.

A bad message gets an ``error`` event, ``{"type": "error", "status", "error":
{"type", "code", "message", "param"}}``, and the connection stays usable; an
error after a response's events began ends that response as a stream would.
Past ``websocket_messages_per_second`` a message gets a ``rate_limit_exceeded``
error event. The server's shutdown closes every connection with code 1001.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from typing import Any

from tornado.websocket import WebSocketClosedError, WebSocketHandler

from jupyter_superfluid.errors import APIError, Forbidden, InvalidRequest
from jupyter_superfluid.generation.items import messages_from_json
from jupyter_superfluid.generation.prompting import Continuation
from jupyter_superfluid.generation.stored_turns import PreparedTurn
from jupyter_superfluid.openai_api.events import ResponsesEncoder
from jupyter_superfluid.openai_api.responses import Responses
from jupyter_superfluid.openai_api.responses_handlers import ResponsesHandler
from jupyter_superfluid.validation import json_document
from jupyter_superfluid.web.auth import Principal
from jupyter_superfluid.web.base import Access, Route

log = logging.getLogger(__name__)

GOING_AWAY = 1001
FORBIDDEN_FIELDS = ("stream", "stream_options", "background")


def error_event(err: APIError) -> dict[str, Any]:
    """A WebSocket ``error`` event (OpenResponses' ``WebSocketErrorEvent``)."""
    payload = {"type": err.type, "code": err.code, "message": err.message, "param": err.param}
    return {"type": "error", "status": err.status, "error": payload}


class Sockets:
    """The open WebSocket connections of one server: limits, and closing them at shutdown."""

    def __init__(self, per_key: int, per_second: float) -> None:
        self.per_key = per_key
        self.per_second = per_second
        self.open: dict[str | None, set[ResponsesSocketHandler]] = {}

    def admit(self, principal: Principal) -> None:
        """429 when ``principal`` already holds its share of connections."""
        held = self.open.get(principal.owner, set())
        if self.per_key and len(held) >= self.per_key:
            raise APIError(
                f"this key already holds {len(held)} WebSocket connections (the limit)",
                status=429,
                code="too_many_connections",
            )

    def add(self, handler: ResponsesSocketHandler) -> None:
        """Count an open connection."""
        self.open.setdefault(handler.principal.owner, set()).add(handler)

    def remove(self, handler: ResponsesSocketHandler) -> None:
        """Forget a closed connection."""
        self.open.get(handler.principal.owner, set()).discard(handler)

    def close_all(self) -> None:
        """Close every connection with 1001 (going away)."""
        for held in list(self.open.values()):
            for handler in list(held):
                handler.close(GOING_AWAY, "server shutting down")


class ResponsesSocketHandler(ResponsesHandler, WebSocketHandler):
    """``/v1/responses``: POST and GET as over HTTP, and WebSocket mode on an upgrade."""

    def initialize(  # type: ignore[override]
        self, access: Access, responses: Responses, sockets: Sockets
    ) -> None:
        """Receive the Responses service and the connection registry."""
        super().initialize(access, responses)
        self.sockets = sockets
        self.local: dict[str, Continuation] = {}  # the latest unstored turn, continuable
        self.window = (0.0, 0)  # (start of this second, messages in it)
        self.running: asyncio.Task[None] | None = None

    async def get(self, *args: Any, **kwargs: Any) -> None:
        """The listing; an upgrade (authenticated already) opens a WebSocket connection."""
        if self.request.headers.get("Upgrade", "").lower() != "websocket":
            await ResponsesHandler.get(self)
            return
        self.sockets.admit(self.principal)
        await WebSocketHandler.get(self, *args, **kwargs)

    def check_origin(self, origin: str | None = None) -> bool:
        """Jupyter's origin check inside Jupyter (it reads the header), else tornado's."""
        jupyters = getattr(super(WebSocketHandler, self), "check_origin", None)
        if jupyters is not None:
            return bool(jupyters())
        return origin is None or WebSocketHandler.check_origin(self, origin)

    def open(self, *args: str, **kwargs: str) -> None:
        """Count the connection; send each event at once."""
        # Events are small frames: with Nagle's algorithm on, each one after the first
        # waits for the client's delayed ACK (~40 ms), so a turn's first text delta came
        # 50-500 ms late. SSE writes a wake-up's events in one flush; here each goes alone.
        self.set_nodelay(True)
        self.sockets.add(self)

    def on_close(self) -> None:
        """Forget the connection and stop what it runs."""
        self.sockets.remove(self)
        if self.running is not None:
            self.running.cancel()

    async def on_message(self, message: str | bytes) -> None:
        """One client message, answered in full before the next is read."""
        if not self._within_rate():
            rate = self.sockets.per_second
            self._send(
                error_event(
                    APIError(
                        f"over {rate:g} messages a second", status=429, code="rate_limit_exceeded"
                    )
                )
            )
            return
        self.running = asyncio.ensure_future(self._respond(message))
        with contextlib.suppress(asyncio.CancelledError):
            await self.running
        self.running = None

    def _within_rate(self) -> bool:
        now = time.monotonic()
        start, count = self.window
        if now - start >= 1.0:
            start, count = now, 0
        self.window = (start, count + 1)
        return not self.sockets.per_second or count < self.sockets.per_second

    async def _respond(self, message: str | bytes) -> None:
        previous = None
        try:
            body = self._create_body(message)
            previous = body.get("previous_response_id")
            if not self.principal.has_scope("responses:write"):
                raise Forbidden(
                    "this key lacks the scope responses:write", code="insufficient_scope"
                )
            retain = body.get("store") is False
            _, pt = await self.responses.prepare(
                body, self.principal, local=self.local, retain=retain
            )
        except APIError as err:
            self._evict(previous)
            self._send(error_event(err))
            return
        except Exception:
            log.exception("superfluid: a WebSocket message failed")
            self._evict(previous)
            self._send(error_event(APIError("internal error", status=500, code="internal_error")))
            return
        await self._run(pt, previous)

    async def _run(self, pt: PreparedTurn, previous: Any) -> None:
        encoder = ResponsesEncoder(pt.id)
        try:
            async for batch in self.responses.turns.run(pt, encoder):
                for event in batch:
                    self._send(event)
        except APIError as err:
            for event in encoder.error(err.code, err.message, err.param, err.type):
                self._send(event)
        resp = pt.response
        if resp is None or resp.status not in ("completed", "incomplete"):
            self._evict(previous)
        elif not pt.store:
            await self._keep(pt, previous)

    def _create_body(self, message: str | bytes) -> dict[str, Any]:
        data = json_document(message.encode() if isinstance(message, str) else message)
        if not isinstance(data, dict):
            raise InvalidRequest("a message must be a JSON object", param="type")
        if data.get("type") != "response.create":
            raise InvalidRequest("the message type must be response.create", param="type")
        for name in FORBIDDEN_FIELDS:
            if name in data:
                raise InvalidRequest(f"{name} is not sent over a WebSocket", param=name)
        return {k: v for k, v in data.items() if k != "type"}

    async def _keep(self, pt: PreparedTurn, previous: Any) -> None:
        """Keep ``pt``'s continuation, the connection's only one (it replaces the last)."""
        assert pt.response is not None
        if isinstance(previous, str) and previous in self.local:
            earlier = self.local[previous].messages
        elif isinstance(previous, str):
            cont, _ = await self.responses.turns.continuation(previous, self.principal.owner)
            earlier = cont.messages if cont is not None else ()
        else:
            earlier = ()
        store = self.responses.turns.store
        info = await asyncio.to_thread(store.get_session, pt.turn.session_id)
        if info is None:
            return
        output = [
            i for i in pt.response.output if i.get("type") != "function_call" or i.get("name")
        ]
        messages = earlier + messages_from_json(pt.input_items) + messages_from_json(output)
        completed = pt.response.status == "completed"
        cont = Continuation(messages, info.id, info.length, dict(info.meta), completed=completed)
        self.local = {pt.id: cont}

    def _evict(self, previous: Any) -> None:
        if isinstance(previous, str):
            self.local.pop(previous, None)

    def _send(self, event: dict[str, Any]) -> None:
        with contextlib.suppress(WebSocketClosedError):
            self.write_message(json.dumps(event))


def routes(*, responses: Responses, sockets: Sockets) -> list[Route]:
    """``/v1/responses`` with WebSocket mode; served before the plain Responses routes."""
    deps = {"responses": responses, "sockets": sockets}
    return [(r"/v1/responses", ResponsesSocketHandler, deps)]

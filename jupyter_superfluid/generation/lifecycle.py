"""One stored-turn lifecycle for the protocols that store responses (Responses and LMSP).

``StoredTurns`` continues a stored conversation (``continuation``), prepares a
turn with its response id (``prepare``), runs it through a protocol's encoder
of neutral events and commits it before the encoder's final events are seen
(``run``), and retrieves, lists and deletes stored responses. A stored response
is kept in one protocol-neutral form (``StoredResponse``: Responses-style output
items, neutral usage, the creating request's echoed parameters), so each
protocol renders any stored response, whichever protocol made it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Generic, Literal, Protocol, TypeVar

from ..chat.types import (
    ChatEvent,
    ChatRequest,
    Finished,
    ItemDone,
    OutputItem,
    PromptProcessed,
    Usage,
)
from ..errors import InvalidRequest, NotFound, generation_error
from ..sessions import (
    IdempotentResult,
    NewResponse,
    ResponseNotFound,
    ResponseRecord,
    SessionNotFound,
    Store,
    new_id,
)
from .continuation import load_continuation
from .items import preview, with_ids
from .prompting import Continuation
from .service import ChatService, Turn

E = TypeVar("E")
_ID_PREFIX = {"reasoning": "rs", "message": "msg", "function_call": "fc"}
BODY_SCHEMA = 2  # stored bodies in the neutral form below; older ones are protocol bodies


def previous_not_found(prev_id: str) -> InvalidRequest:
    """An unknown, deleted, unstored or another principal's previous response (400)."""
    return InvalidRequest(
        f"previous response with id '{prev_id}' not found",
        param="previous_response_id",
        code="previous_response_not_found",
    )


def response_not_found(response_id: str) -> NotFound:
    """An unknown, deleted, unstored or another principal's response (404)."""
    return NotFound(
        f"no stored response with id '{response_id}'",
        param="response_id",
        code="response_not_found",
    )


def item_id(response_id: str, kind: str, index: int) -> str:
    """The id of a response's output item: ``msg_…_0``, ``rs_…_1``, ``fc_…_2``."""
    return f"{_ID_PREFIX[kind]}_{response_id.removeprefix('resp_')}_{index}"


def call_id(response_id: str, index: int, given: str | None = None) -> str:
    """A function call's id: the parser's, else ``call_…_index``."""
    return given or f"call_{response_id.removeprefix('resp_')}_{index}"


def output_item(response_id: str, index: int, out: OutputItem) -> dict[str, Any]:
    """A finished output item in the Responses shape every protocol renders from."""
    status = "completed" if out.complete else "incomplete"
    iid = item_id(response_id, out.kind, index)
    if out.kind == "function_call":
        item: dict[str, Any] = {
            "id": iid,
            "type": "function_call",
            "call_id": call_id(response_id, index, out.call_id),
            "name": out.name or "",
            "arguments": out.text,
            "status": status,
        }
        if out.namespace:
            item["namespace"] = out.namespace
        return item
    if out.kind == "reasoning":
        return {
            "id": iid,
            "type": "reasoning",
            "summary": [],
            "content": [{"type": "reasoning_text", "text": out.text}],
            "status": status,
        }
    return {
        "id": iid,
        "type": "message",
        "role": "assistant",
        "status": status,
        "content": [{"type": "output_text", "text": out.text, "annotations": [], "logprobs": []}],
    }


def canonical_item(item: Mapping[str, Any]) -> dict[str, Any]:
    """A stored output item of either protocol (LMSP's are a subset) in the Responses shape."""
    kind = item.get("type")
    status = item.get("status", "completed")
    parts = item.get("content") or item.get("summary") or []
    text = "".join(p.get("text", "") for p in parts if isinstance(p, dict))
    if kind == "message":
        return {
            "id": item.get("id"),
            "type": "message",
            "role": "assistant",
            "status": status,
            "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}],
        }
    if kind == "reasoning":
        return {
            "id": item.get("id"),
            "type": "reasoning",
            "summary": [],
            "content": [{"type": "reasoning_text", "text": text}],
            "status": status,
        }
    return {**item, "status": status}


@dataclass(frozen=True)
class StoredResponse:
    """A response as every protocol renders it: neutral facts plus the request's echo."""

    id: str
    model: str
    status: str  # in_progress, completed, incomplete, failed or cancelled
    created_at: int
    protocol: str  # which protocol created it ("openai" or "lmsp")
    previous_response_id: str | None = None
    store: bool = True
    completed_at: int | None = None
    output: tuple[dict[str, Any], ...] = ()  # Responses-style output items
    usage: Usage | None = None
    incomplete_reason: str | None = None
    error: Mapping[str, Any] | None = None  # failed: {"code" (the engine's, or None), "message"}
    echo: Mapping[str, Any] = field(default_factory=dict)  # in the creating protocol's words
    sampling: Mapping[str, Any] = field(default_factory=dict)  # temperature, top_p used

    def stored_body(self) -> dict[str, Any]:
        """What the store keeps as this response's body."""
        u = self.usage or Usage()
        return {
            "schema": BODY_SCHEMA,
            "status": self.status,
            "completed_at": self.completed_at,
            "incomplete_reason": self.incomplete_reason,
            "error": dict(self.error) if self.error else None,
            "usage": {
                "input_tokens": u.input_tokens,
                "cached_tokens": u.cached_tokens,
                "output_tokens": u.output_tokens,
                "reasoning_tokens": u.reasoning_tokens,
            },
            "echo": dict(self.echo),
            "sampling": dict(self.sampling),
        }


def stored_response(rec: ResponseRecord) -> StoredResponse:
    """The neutral form of a stored record (older records hold a protocol's own body)."""
    body: Mapping[str, Any] = rec.body if isinstance(rec.body, Mapping) else {}
    raw = body.get("usage") or {}
    if body.get("schema") == BODY_SCHEMA:
        usage = Usage(**{k: int(raw.get(k, 0)) for k in Usage.__dataclass_fields__})
        echo, sampling = body.get("echo") or {}, body.get("sampling") or {}
        completed_at, reason = body.get("completed_at"), body.get("incomplete_reason")
    else:
        details = raw.get("output_tokens_details") or {}
        usage = Usage(
            int(raw.get("input_tokens", 0)),
            rec.cached_tokens,
            int(raw.get("output_tokens", 0)),
            int(details.get("reasoning_tokens", 0)),
        )
        echo = body if rec.protocol == "openai" else {}
        sampling = {k: body[k] for k in ("temperature", "top_p") if body.get(k) is not None}
        completed_at = None
        reason = (body.get("incomplete_details") or {}).get("reason")
    return StoredResponse(
        id=rec.id,
        model=rec.model,
        status=rec.status,
        created_at=int(rec.created_at),
        protocol=rec.protocol,
        previous_response_id=rec.previous_response_id,
        completed_at=completed_at,
        output=tuple(canonical_item(i) for i in rec.output_items),
        usage=usage,
        incomplete_reason=reason,
        echo=echo,
        sampling=sampling,
    )


@dataclass
class PreparedTurn:
    """A rendered turn of a storing protocol, its response id and what to store with it."""

    id: str
    turn: Turn
    owner: str | None
    protocol: str
    store: bool
    previous_response_id: str | None
    input_items: list[dict[str, Any]]
    echo: dict[str, Any]
    created_at: int
    response: StoredResponse | None = None  # once finished

    def pending(self) -> StoredResponse:
        """The response while it runs: no output yet."""
        return StoredResponse(
            id=self.id,
            model=self.turn.request.model,
            status="in_progress",
            created_at=self.created_at,
            protocol=self.protocol,
            previous_response_id=self.previous_response_id,
            store=self.store,
            echo=self.echo,
            sampling=_sampling(self.turn),
        )


class TurnEncoder(Protocol, Generic[E]):
    """A protocol's serializer of one turn's neutral events."""

    def opened(self, pending: StoredResponse) -> list[E]:
        """The events once the prompt is evaluated."""

    def on(self, event: ChatEvent) -> list[E]:
        """The events one neutral item event implies."""

    def closed(self, response: StoredResponse) -> list[E]:
        """The final events (sent after the response is committed)."""


class SilentEncoder:
    """No events: for answers that are not streamed."""

    def opened(self, pending: StoredResponse) -> list[Any]:
        """Nothing."""
        return []

    def on(self, event: ChatEvent) -> list[Any]:
        """Nothing."""
        return []

    def closed(self, response: StoredResponse) -> list[Any]:
        """Nothing."""
        return []


class StoredTurns:
    """Continue, run and commit, retrieve, list and delete stored responses."""

    def __init__(self, chat: ChatService, store: Store) -> None:
        self.chat = chat
        self.store = store

    async def continuation(
        self, previous_id: str | None, owner: str | None
    ) -> tuple[Continuation | None, ResponseRecord | None]:
        """The stored conversation ``previous_id`` continues (none without one), or a 400."""
        if previous_id is None:
            return None, None
        found = await load_continuation(self.store, previous_id, owner)
        if found is None:
            raise previous_not_found(previous_id)
        return found

    async def prepare(
        self,
        request: ChatRequest,
        continuation: Continuation | None,
        *,
        owner: str | None,
        protocol: str,
        store: bool,
        previous_response_id: str | None,
        input_items: list[dict[str, Any]],
        echo: dict[str, Any],
    ) -> PreparedTurn:
        """Render ``request`` and give it a response id."""
        turn = await self.chat.prepare(request, continuation)
        rid = new_id("resp_")
        return PreparedTurn(
            rid,
            turn,
            owner,
            protocol,
            store,
            previous_response_id,
            with_ids(input_items, rid),
            echo,
            int(time.time()),
        )

    async def run(
        self,
        pt: PreparedTurn,
        encoder: TurnEncoder[E],
        idempotency: Callable[[list[E]], IdempotentResult | None] | None = None,
    ) -> AsyncGenerator[list[E], None]:
        """The encoder's events, a list per neutral event; the final ones after the commit.

        ``idempotency`` makes the record an Idempotency-Key keeps (from the final
        events), committed with the turn. Closing early cancels the generation.
        """
        done: dict[int, OutputItem] = {}
        events = self.chat.run(pt.turn)
        opened = False
        try:
            async for event in events:
                if isinstance(event, PromptProcessed):
                    opened = True
                    out = encoder.opened(pt.pending())
                elif isinstance(event, Finished):
                    # Opened first, also when an engine crash ended it before it began.
                    out = [] if opened else encoder.opened(pt.pending())
                    pt.response = self._finished(pt, event, done)
                    out += encoder.closed(pt.response)
                    if pt.response.status in ("completed", "incomplete"):
                        await self._commit(pt, idempotency(out) if idempotency else None)
                else:
                    if isinstance(event, ItemDone):
                        done[event.index] = event.item
                    out = encoder.on(event)
                if out:
                    yield out
        finally:
            await events.aclose()

    async def complete(
        self,
        pt: PreparedTurn,
        encoder: TurnEncoder[E],
        idempotency: Callable[[list[E]], IdempotentResult | None] | None = None,
    ) -> StoredResponse:
        """Run to the end: the committed response, or the generation's error."""
        async for _ in self.run(pt, encoder, idempotency):
            pass
        assert pt.response is not None
        if pt.response.status == "failed":
            raise generation_error(pt.turn.result.reason, pt.turn.result.code)
        return pt.response

    @staticmethod
    def _finished(pt: PreparedTurn, fin: Finished, done: dict[int, OutputItem]) -> StoredResponse:
        error = None
        if fin.status == "failed":  # code: the engine's, when the engine itself failed
            error = {"code": fin.code, "message": fin.reason or "generation failed"}
        return replace(
            pt.pending(),
            status=fin.status,
            completed_at=int(time.time()) if fin.status == "completed" else None,
            output=tuple(output_item(pt.id, i, done[i]) for i in sorted(done)),
            usage=fin.usage,
            incomplete_reason=(fin.reason or "max_output_tokens")
            if fin.status == "incomplete"
            else None,
            error=error,
        )

    async def _commit(self, pt: PreparedTurn, idempotency: IdempotentResult | None) -> None:
        """Log the session and, when stored, the response: durable before visible."""
        resp = pt.response
        assert resp is not None
        record = None
        if pt.store:
            record = NewResponse(
                id=pt.id,
                model=resp.model,
                status=resp.status,
                body=resp.stored_body(),
                input_items=pt.input_items,
                output_items=list(resp.output),
                previous_response_id=pt.previous_response_id,
                principal=pt.owner,
                protocol=pt.protocol,  # type: ignore[arg-type]
                created_at=pt.created_at,
                cached_tokens=resp.usage.cached_tokens if resp.usage else 0,
                preview=preview(pt.input_items, list(resp.output)),
            )
        try:
            await self.chat.commit(pt.turn, record, idempotency)
        except (ResponseNotFound, SessionNotFound) as err:
            # The previous response was deleted while this turn generated.
            raise previous_not_found(pt.previous_response_id or "") from err

    # -- stored responses ------------------------------------------------------

    async def record(self, response_id: str, owner: str | None) -> ResponseRecord:
        """A stored record visible to ``owner``, or 404 ``response_not_found``."""
        rec = await asyncio.to_thread(self.store.get_response, response_id, owner)
        if rec is None:
            raise response_not_found(response_id)
        return rec

    async def retrieve(self, response_id: str, owner: str | None) -> StoredResponse:
        """A stored response visible to ``owner``, or 404."""
        return stored_response(await self.record(response_id, owner))

    async def delete(self, response_id: str, owner: str | None) -> None:
        """Remove the record and purge its session, or 404."""
        if not await asyncio.to_thread(self.store.delete_response, response_id, owner):
            raise response_not_found(response_id)

    async def listing(
        self, owner: str | None, *, limit: int, after: str | None, order: Literal["asc", "desc"]
    ) -> tuple[list[ResponseRecord], bool]:
        """Up to ``limit`` records after ``after`` in ``order``, and whether more follow."""
        try:
            records = await asyncio.to_thread(
                self.store.list_responses, owner, limit=limit + 1, after=after, order=order
            )
        except ResponseNotFound as err:
            raise InvalidRequest(f"after: no response '{after}'", param="after") from err
        return records[:limit], len(records) > limit


def _sampling(turn: Turn) -> dict[str, Any]:
    used = turn.generate.sampling
    return {"temperature": used.temperature, "top_p": used.top_p}

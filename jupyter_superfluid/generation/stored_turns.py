"""Stored turns, one way for the protocols that store responses (Responses and LMSP).

``StoredTurns`` continues a stored conversation (``continuation``), prepares a
turn with its response id (``prepare``), runs it through a protocol's encoder
of neutral events and commits it before the encoder's final events are seen
(``run``), and retrieves, lists and deletes stored responses, each kept in the
one neutral form of ``stored.StoredResponse``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass, replace
from typing import Any, Generic, Literal, Protocol, TypeVar

from jupyter_superfluid.chat.types import (
    ChatEvent,
    ChatRequest,
    Finished,
    ItemDone,
    OutputItem,
    PromptProcessed,
)
from jupyter_superfluid.errors import InvalidRequest, NotFound, generation_error
from jupyter_superfluid.generation.continuation import (
    StoredMessages,
    load_continuation,
    read_continuation,
)
from jupyter_superfluid.generation.items import preview, with_ids
from jupyter_superfluid.generation.prompting import Continuation, ContinuationReader
from jupyter_superfluid.generation.service import ChatService, Turn
from jupyter_superfluid.generation.stored import StoredResponse, output_item, stored_response
from jupyter_superfluid.store import (
    ConversationAppend,
    IdempotentResult,
    NewResponse,
    ResponseNotFound,
    ResponseRecord,
    SessionNotFound,
    Store,
    new_id,
)

E = TypeVar("E")


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
    conversation: ConversationAppend | None = None  # the conversation it moves ahead

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
        self._messages = StoredMessages()  # stored conversations, read and checked once

    async def continuation(
        self, previous_id: str | None, owner: str | None
    ) -> tuple[Continuation | None, ResponseRecord | None]:
        """The stored conversation ``previous_id`` continues (none without one), or a 400."""
        if previous_id is None:
            return None, None
        found = await load_continuation(self.store, previous_id, owner, self._messages)
        if found is None:
            raise previous_not_found(previous_id)
        return found

    def continuation_reader(self, previous_id: str, owner: str | None) -> ContinuationReader:
        """``continuation``, read when the turn is rendered (one hop off the loop for both)."""

        def read() -> Continuation:
            found = read_continuation(self.store, previous_id, owner, self._messages)
            if found is None:
                raise previous_not_found(previous_id)
            return found[0]

        return read

    async def prepare(
        self,
        request: ChatRequest,
        continuation: Continuation | ContinuationReader | None,
        *,
        owner: str | None,
        protocol: str,
        store: bool,
        previous_response_id: str | None,
        input_items: list[dict[str, Any]],
        echo: dict[str, Any],
        retain: bool | None = None,
    ) -> PreparedTurn:
        """Render ``request`` and give it a response id (``retain``: keep its KV state)."""
        # A stored response can be continued: the engine keeps its KV state.
        turn = await self.chat.prepare(
            request, continuation, retain=store or bool(retain), owner=owner
        )
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
                conversation=pt.conversation,
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

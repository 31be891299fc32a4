"""``/v1/conversations…``: the Conversations API over the durable store.

A conversation is a branch head that moves: each response created with
``conversation`` continues the head warm (``previous_response_id`` under the hood)
and, in the same commit, becomes the new head with its input and output items.
Items added directly wait, pending, for the next response, which takes them as
input. Deleting a conversation purges the responses it holds. A conversation is
owned by the key that created it, as responses are.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from jupyter_superfluid.errors import InvalidRequest, NotFound
from jupyter_superfluid.generation.items import dump_items, with_ids
from jupyter_superfluid.openai_api.conversations_protocol import (
    ConversationCreateRequest,
    ConversationListQuery,
    ConversationRef,
    ConversationUpdateRequest,
    ItemsCreateRequest,
    ItemsListQuery,
)
from jupyter_superfluid.openai_api.paging import item_page, list_body
from jupyter_superfluid.openai_api.protocol import parse
from jupyter_superfluid.openai_api.stored import listed_response
from jupyter_superfluid.store import ResponseRecord, Store, new_id
from jupyter_superfluid.store.conversations import (
    ConversationItemNotFound,
    ConversationNotFound,
    ConversationRecord,
    NotInConversation,
)
from jupyter_superfluid.web.auth import Principal


def conversation_not_found(conv_id: str, param: str = "conversation_id") -> NotFound:
    """An unknown, deleted or another principal's conversation (404)."""
    return NotFound(
        f"conversation with id '{conv_id}' not found", param=param, code="conversation_not_found"
    )


def conversation_body(rec: ConversationRecord) -> dict[str, Any]:
    """The conversation object, with this server's extension fields (title, head)."""
    return {
        "id": rec.id,
        "object": "conversation",
        "created_at": int(rec.created_at),
        "metadata": rec.metadata,
        "title": rec.title,
        "updated_at": int(rec.updated_at),
        "head_response_id": rec.head_response_id,
    }


@dataclass(frozen=True)
class ConversationTurn:
    """Where a response in a conversation starts: the head it continues and the items before."""

    id: str
    previous_response_id: str | None
    history: list[dict[str, Any]]  # sent before the request's own input
    model: str | None = None  # the head's model, for a turn that names none
    rebase: bool = False  # a new branch: the conversation moves to it


def not_in_conversation(response_id: str, param: str) -> InvalidRequest:
    """A response that is not one of the conversation's own (400)."""
    return InvalidRequest(
        f"response '{response_id}' is not a response of this conversation", param=param
    )


def _new_items(items: list[Any]) -> list[dict[str, Any]]:
    """Validated items as stored, each with an id of its own."""
    return with_ids(dump_items(items), new_id("resp_"))


class Conversations:
    """Create, read, update and delete conversations and their items."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def _call(self, fn: Any, *args: Any, conv_id: str) -> Any:
        try:
            return await asyncio.to_thread(fn, *args)
        except ConversationNotFound as err:
            raise conversation_not_found(conv_id) from err

    async def create(self, body: Any, principal: Principal) -> dict[str, Any]:
        """A new conversation, optionally with items and metadata."""
        req = parse(ConversationCreateRequest, body)
        items = _new_items(list(req.items or []))
        rec = await asyncio.to_thread(
            self.store.create_conversation,
            new_id("conv_"),
            principal.owner,
            dict(req.metadata or {}),
            items,
        )
        return conversation_body(rec)

    async def retrieve(self, conv_id: str, principal: Principal) -> dict[str, Any]:
        """One conversation."""
        fn = self.store.get_conversation
        return conversation_body(await self._call(fn, conv_id, principal.owner, conv_id=conv_id))

    async def update(self, conv_id: str, body: Any, principal: Principal) -> dict[str, Any]:
        """Replace the metadata (a chat's title is ``metadata.title``), or switch branch."""
        req = parse(ConversationUpdateRequest, body)
        if req.metadata is None and req.head_response_id is None:
            raise InvalidRequest("metadata is required", param="metadata")
        owner = principal.owner
        if req.head_response_id is not None:
            try:
                switch = self.store.switch_conversation_branch
                await self._call(switch, conv_id, owner, req.head_response_id, conv_id=conv_id)
            except NotInConversation as err:
                raise not_in_conversation(req.head_response_id, "head_response_id") from err
        if req.metadata is not None:
            rename = self.store.update_conversation
            await self._call(rename, conv_id, owner, dict(req.metadata), conv_id=conv_id)
        return await self.retrieve(conv_id, principal)

    async def responses(self, conv_id: str, principal: Principal) -> dict[str, Any]:
        """Every response of the conversation, on every branch, oldest first (its tree)."""
        fn = self.store.conversation_responses
        records = await self._call(fn, conv_id, principal.owner, conv_id=conv_id)
        data = [listed_response(r) for r in records]
        return list_body(data, False)

    async def delete(self, conv_id: str, principal: Principal) -> dict[str, Any]:
        """Delete it and purge its responses."""
        await self._call(self.store.delete_conversation, conv_id, principal.owner, conv_id=conv_id)
        return {"id": conv_id, "object": "conversation.deleted", "deleted": True}

    async def listing(self, principal: Principal, query: dict[str, Any]) -> dict[str, Any]:
        """This principal's conversations by last activity, searchable by title (``q``)."""
        q = parse(ConversationListQuery, query)
        try:
            records = await asyncio.to_thread(
                self.store.list_conversations,
                principal.owner,
                limit=q.limit + 1,
                after=q.after,
                order=q.order,
                query=q.q,
            )
        except ConversationNotFound as err:
            raise InvalidRequest(f"after: no conversation '{q.after}'", param="after") from err
        data = [conversation_body(r) for r in records[: q.limit]]
        return list_body(data, len(records) > q.limit)

    async def items(
        self, conv_id: str, principal: Principal, query: dict[str, Any]
    ) -> dict[str, Any]:
        """The conversation's items, paginated (newest first by default)."""
        q = parse(ItemsListQuery, query)
        fn = self.store.conversation_items
        found = await self._call(fn, conv_id, principal.owner, conv_id=conv_id)
        # An extension: each item names the response it belongs to (None while pending).
        return item_page([{**i.item, "response_id": i.response_id} for i in found], q)

    async def add_items(self, conv_id: str, body: Any, principal: Principal) -> dict[str, Any]:
        """Append items (pending until the next response); the added items."""
        req = parse(ItemsCreateRequest, body)
        items = _new_items(list(req.items))
        fn = self.store.add_conversation_items
        await self._call(fn, conv_id, principal.owner, items, conv_id=conv_id)
        return list_body(items, False)

    async def item(self, conv_id: str, item_id: str, principal: Principal) -> dict[str, Any]:
        """One item of the conversation."""
        fn = self.store.conversation_items
        for found in await self._call(fn, conv_id, principal.owner, conv_id=conv_id):
            if found.id == item_id:
                return found.item
        raise NotFound(f"no item '{item_id}' in {conv_id}", param="item_id", code="item_not_found")

    async def delete_item(self, conv_id: str, item_id: str, principal: Principal) -> dict[str, Any]:
        """Remove one item; the conversation."""
        try:
            fn = self.store.delete_conversation_item
            await self._call(fn, conv_id, principal.owner, item_id, conv_id=conv_id)
        except ConversationItemNotFound as err:
            raise NotFound(
                f"no item '{item_id}' in {conv_id}", param="item_id", code="item_not_found"
            ) from err
        return await self.retrieve(conv_id, principal)

    async def turn(
        self,
        ref: Any,
        principal: Principal,
        *,
        fork_from: str | None = None,
        from_root: bool = False,
    ) -> ConversationTurn:
        """Where a response created with ``conversation: ref`` starts.

        ``fork_from`` (one of the conversation's responses) or ``from_root`` start a new
        branch there, which the conversation then moves to.
        """
        conv_id = ref if isinstance(ref, str) else parse(ConversationRef, ref, "conversation").id
        if fork_from is not None or from_root:
            return await self._branch(conv_id, principal, fork_from)
        state = self.store.conversation_state
        try:
            rec, items = await asyncio.to_thread(state, conv_id, principal.owner, pending_only=True)
            head = await self._head(rec)
            if head is not None and rec.head_valid:
                pending = [i.item for i in items]  # read pending only: the head is valid
                return ConversationTurn(rec.id, head.id, pending, head.model)
            if rec.head_valid:  # its head is gone: the next turn sends every item
                rec, items = await asyncio.to_thread(state, conv_id, principal.owner)
        except ConversationNotFound as err:
            raise conversation_not_found(conv_id, "conversation") from err
        model = head.model if head is not None else None
        return ConversationTurn(rec.id, None, [i.item for i in items], model)

    async def _branch(
        self, conv_id: str, principal: Principal, fork_from: str | None
    ) -> ConversationTurn:
        """A new branch of the conversation from ``fork_from`` (None: from its root)."""
        try:
            if fork_from is not None:
                fn = self.store.is_in_conversation
                if not await asyncio.to_thread(fn, conv_id, principal.owner, fork_from):
                    raise not_in_conversation(fork_from, "previous_response_id")
                return ConversationTurn(conv_id, fork_from, [], None, rebase=True)
            rec = await asyncio.to_thread(self.store.get_conversation, conv_id, principal.owner)
        except ConversationNotFound as err:
            raise conversation_not_found(conv_id, "conversation") from err
        head = await self._head(rec)  # its model, for a turn that names none
        model = head.model if head is not None else None
        return ConversationTurn(conv_id, None, [], model, rebase=True)

    async def _head(self, rec: ConversationRecord) -> ResponseRecord | None:
        """The conversation's head response, unless there is none or it was deleted since."""
        if rec.head_response_id is None:
            return None
        return await asyncio.to_thread(self.store.get_response, rec.head_response_id)

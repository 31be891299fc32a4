"""Loading a stored conversation to continue it, for every protocol (one store)."""

from __future__ import annotations

import asyncio
import threading
from collections import OrderedDict
from dataclasses import replace
from typing import Any

from jupyter_superfluid.chat.types import ChatMessage
from jupyter_superfluid.generation.items import messages_from_json
from jupyter_superfluid.generation.prompting import Continuation
from jupyter_superfluid.store import ResponseRecord, Store

CONVERSATIONS_REMEMBERED = 1024


class StoredMessages:
    """The messages of stored conversations, by the id of their last response.

    A stored response never changes (deleting one only hides it, its continuations keep
    it), so the conversation ending at one is read from the store and its items checked
    once: continuing it again, or continuing the turn that continued it, reads only the
    new response's own items.
    """

    def __init__(self, capacity: int = CONVERSATIONS_REMEMBERED) -> None:
        self._capacity = capacity
        self._known: OrderedDict[str, tuple[ChatMessage, ...]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, response_id: str | None) -> tuple[ChatMessage, ...] | None:
        """The conversation ending at ``response_id`` if remembered (``()`` for None)."""
        if response_id is None:
            return ()
        with self._lock:
            found = self._known.get(response_id)
            if found is not None:
                self._known.move_to_end(response_id)
            return found

    def put(self, response_id: str, messages: tuple[ChatMessage, ...]) -> None:
        """Remember the conversation ending at ``response_id``."""
        with self._lock:
            self._known[response_id] = messages
            if len(self._known) > self._capacity:
                self._known.popitem(last=False)


async def load_continuation(
    store: Store, response_id: str, owner: str | None, known: StoredMessages | None = None
) -> tuple[Continuation, ResponseRecord] | None:
    """The conversation ending at a stored response visible to ``owner``, or None."""
    # One hop to a thread for all the reads: each hop is a thread wake-up and a
    # loop wake-up, which on a busy machine cost more than the reads themselves.
    return await asyncio.to_thread(read_continuation, store, response_id, owner, known)


def read_continuation(
    store: Store, response_id: str, owner: str | None, known: StoredMessages | None = None
) -> tuple[Continuation, ResponseRecord] | None:
    """``load_continuation`` on this thread (blocking: the store's reads)."""
    known = known or StoredMessages()
    prev = store.get_response(response_id, owner)
    if prev is None:
        return None
    messages = known.get(prev.id)
    if messages is None:
        messages = _conversation(store, prev, owner, known)
    info = store.get_session(prev.session_id)
    meta = dict(info.meta) if info is not None else {}
    cont = Continuation(
        messages, prev.session_id, prev.end, meta, completed=prev.status == "completed"
    )
    return cont, prev


def _conversation(
    store: Store, prev: ResponseRecord, owner: str | None, known: StoredMessages
) -> tuple[ChatMessage, ...]:
    """The messages of the conversation ending at ``prev``, remembered on the way."""
    before = known.get(prev.previous_response_id)
    if before is not None:
        messages = before + _own(prev)
        known.put(prev.id, messages)
        return messages
    messages = ()
    for record in store.response_chain(prev.id, owner):
        messages += _own(record)
        known.put(record.id, messages)
    return messages


def _own(record: ResponseRecord) -> tuple[ChatMessage, ...]:
    """A record's input and output messages; its media named as the continuation's."""
    messages = messages_from_json(record.input_items) + messages_from_json(
        _callable(record.output_items)
    )
    # Stored media are this request's through previous_response_id (for error messages).
    return tuple(
        replace(m, media=tuple(replace(x, param="previous_response_id") for x in m.media))
        if m.media
        else m
        for m in messages
    )


def _callable(items: list[Any]) -> list[Any]:
    """Stored output items without the nameless calls that earlier versions kept of a call
    the token cap cut before its name (they are no call, and no valid input item)."""
    return [i for i in items if not (i.get("type") == "function_call" and not i.get("name"))]

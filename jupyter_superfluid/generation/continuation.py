"""Loading a stored conversation to continue it, for every protocol (one store)."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

from jupyter_superfluid.chat.types import ChatMessage
from jupyter_superfluid.generation.items import messages_from_json
from jupyter_superfluid.generation.prompting import Continuation
from jupyter_superfluid.store import ResponseRecord, Store


async def load_continuation(
    store: Store, response_id: str, owner: str | None
) -> tuple[Continuation, ResponseRecord] | None:
    """The conversation ending at a stored response visible to ``owner``, or None."""
    # One hop to a thread for all three reads: each hop is a thread wake-up and a
    # loop wake-up, which on a busy machine cost more than the reads themselves.
    return await asyncio.to_thread(_load, store, response_id, owner)


def _load(
    store: Store, response_id: str, owner: str | None
) -> tuple[Continuation, ResponseRecord] | None:
    prev = store.get_response(response_id, owner)
    if prev is None:
        return None
    chain = store.response_chain(response_id, owner)
    messages: tuple[ChatMessage, ...] = ()
    for record in chain:
        messages += messages_from_json(record.input_items) + messages_from_json(
            _callable(record.output_items)
        )
    # Stored media are this request's through previous_response_id (for error messages).
    messages = tuple(
        replace(m, media=tuple(replace(x, param="previous_response_id") for x in m.media))
        if m.media
        else m
        for m in messages
    )
    info = store.get_session(prev.session_id)
    meta = dict(info.meta) if info is not None else {}
    cont = Continuation(
        messages, prev.session_id, prev.end, meta, completed=prev.status == "completed"
    )
    return cont, prev


def _callable(items: list[Any]) -> list[Any]:
    """Stored output items without the nameless calls that earlier versions kept of a call
    the token cap cut before its name (they are no call, and no valid input item)."""
    return [i for i in items if not (i.get("type") == "function_call" and not i.get("name"))]

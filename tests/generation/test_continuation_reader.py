"""A stored conversation still to be read is read with the render: one hop off the loop.

``ChatService.prepare`` takes a ``ContinuationReader`` where a protocol names its model
(so it need not read the stored response first); the reader is called once, on the
render's worker thread, and what it raises is the request's answer. Real engine (the
tiny ChatML model in a thread), real SQLite store.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from jupyter_superfluid.chat.types import ChatMessage, ChatRequest
from jupyter_superfluid.engine.launch import launcher_for
from jupyter_superfluid.errors import InvalidRequest
from jupyter_superfluid.generation.prompting import Continuation
from jupyter_superfluid.generation.service import ChatService
from jupyter_superfluid.models.hub import ModelHub
from jupyter_superfluid.models.lifecycle import ModelLifecycle
from jupyter_superfluid.models.registry import ModelRegistry
from jupyter_superfluid.store import Store

CHATML = "superfluid/tiny-chatml"
EARLIER = (ChatMessage("user", "earlier question"), ChatMessage("assistant", "earlier answer"))
NEW = ChatRequest(CHATML, (ChatMessage("user", "new question"),))


def prepare_with(cache: Path, root: Path, continuation: object) -> tuple[list[int], list[int]]:
    """The prompt tokens of ``NEW`` continuing ``continuation``, and of the whole conversation."""

    async def run() -> tuple[list[int], list[int]]:
        registry = ModelRegistry(
            [CHATML], cache_dir=cache, context_size=512, launcher=launcher_for("thread")
        )
        hub = ModelHub(ModelLifecycle(registry))
        store = Store(root)
        chat = ChatService(hub, store)
        try:
            turn = await chat.prepare(NEW, continuation)  # type: ignore[arg-type]
            whole = ChatRequest(CHATML, EARLIER + NEW.messages)
            return turn.prompt_tokens, (await chat.prepare(whole)).prompt_tokens
        finally:
            await hub.close()
            store.close()

    return asyncio.run(run())


def test_a_reader_is_called_once_off_the_loop_and_continues_what_it_read(sf_model_cache, tmp_path):
    calls: list[int] = []
    loop_thread = threading.get_ident()  # asyncio.run's loop runs on this thread

    def read() -> Continuation:
        calls.append(threading.get_ident())
        return Continuation(EARLIER)

    continued, whole = prepare_with(sf_model_cache, tmp_path, read)
    assert len(calls) == 1 and calls[0] != loop_thread
    assert continued == whole  # the prompt holds what the reader read, as a fresh render would


def test_what_a_reader_raises_is_the_answer(sf_model_cache, tmp_path):
    def read() -> Continuation:
        raise InvalidRequest("gone", param="previous_response_id", code="not_found_here")

    with pytest.raises(InvalidRequest) as info:
        prepare_with(sf_model_cache, tmp_path, read)
    assert info.value.param == "previous_response_id"
    assert info.value.code == "not_found_here"

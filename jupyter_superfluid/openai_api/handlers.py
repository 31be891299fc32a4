"""Thin Tornado handlers of the OpenAI endpoints; the URL table is at the bottom."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from typing import ClassVar

from pydantic import BaseModel

from ..generation.service import Turn
from ..web.base import ClientGone, ProtocolHandler
from .protocol import ChatCompletionRequest


class OpenAIHandler(ProtocolHandler):
    """Base of the OpenAI handlers: OpenAI's error shape."""

    error_style = "openai"

    async def pump_sse(
        self, chunks: AsyncGenerator[str, None], turn: Turn, *, named: bool = False
    ) -> None:
        """Send ``chunks`` as SSE; a disconnect closes them, which cancels generation.

        The first chunk comes once the prompt is evaluated, so the warm header
        can carry the engine's count.
        """
        self.start_sse()
        task = asyncio.current_task()

        def cancel() -> None:
            if task is not None:
                task.cancel()

        self.on_close(cancel)
        try:
            async for chunk in chunks:
                if not self._headers_written:
                    self.set_header("x-superfluid-warm", str(turn.cached_tokens))
                if named:
                    event, _, data = chunk.partition("\n")
                    await self.send_sse(data, event=event)
                else:
                    await self.send_sse(chunk)
        except (ClientGone, asyncio.CancelledError):
            pass
        finally:
            await chunks.aclose()  # type: ignore[attr-defined]
        if not self._finished:
            self.finish()


class ModelsHandler(OpenAIHandler):
    """``GET /v1/models``."""

    async def get(self) -> None:
        """The served models, in OpenAI's list shape."""
        self.write_json({"object": "list", "data": self.services.model_list()})


class ModelHandler(OpenAIHandler):
    """``GET /v1/models/{id}``."""

    async def get(self, model_id: str) -> None:
        """One served model."""
        self.write_json(self.services.model_object(model_id))


class ChatCompletionsHandler(OpenAIHandler):
    """``POST /v1/chat/completions``."""

    request_models: ClassVar[dict[str, type[BaseModel]]] = {"post": ChatCompletionRequest}

    async def post(self) -> None:
        """A chat completion, streamed or not."""
        service = self.services.chat_completions
        req, turn = await service.prepare(self.json_body())
        if req.stream:
            await self.pump_sse(service.stream(req, turn), turn)
            return
        body = await service.complete(req, turn)
        self.set_header("x-superfluid-warm", str(turn.result.usage.cached_tokens))
        self.write_json(body)


def routes() -> list[tuple[str, type[ProtocolHandler]]]:
    """The OpenAI URL table (relative to the server's base URL)."""
    from .responses_handlers import responses_routes

    return [
        (r"/v1/models", ModelsHandler),
        (r"/v1/models/(?P<model_id>.+)", ModelHandler),
        (r"/v1/chat/completions", ChatCompletionsHandler),
        *responses_routes(),
    ]

"""Thin Tornado handlers of ``/v1/models`` and ``/v1/chat/completions``; ``routes`` last."""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel

from jupyter_superfluid.models.hub import ModelHub
from jupyter_superfluid.openai_api.chat_completions import ChatCompletions
from jupyter_superfluid.openai_api.models import model_list, model_object
from jupyter_superfluid.openai_api.protocol import ChatCompletionRequest
from jupyter_superfluid.web.base import Access, ProtocolHandler, Route


class OpenAIHandler(ProtocolHandler):
    """Base of the OpenAI handlers: OpenAI's error shape."""

    error_style = "openai"


class ServedModelsHandler(OpenAIHandler):
    """Base of the handlers that describe the served models."""

    scope = {"GET": "models:read"}

    def initialize(self, access: Access, models: ModelHub) -> None:
        """Receive the served models."""
        self.access, self.models = access, models


class ModelsHandler(ServedModelsHandler):
    """``GET /v1/models``."""

    async def get(self) -> None:
        """The served models, in OpenAI's list shape."""
        self.write_json(model_list(self.models))


class ModelHandler(ServedModelsHandler):
    """``GET /v1/models/{id}``."""

    async def get(self, model_id: str) -> None:
        """One served model."""
        self.write_json(model_object(self.models, model_id))


class ChatCompletionsHandler(OpenAIHandler):
    """``POST /v1/chat/completions``."""

    scope = {"POST": "responses:write"}
    request_models: ClassVar[dict[str, type[BaseModel]]] = {"post": ChatCompletionRequest}

    def initialize(self, access: Access, chat_completions: ChatCompletions) -> None:
        """Receive the chat-completions service."""
        self.access, self.service = access, chat_completions

    async def post(self) -> None:
        """A chat completion, streamed or not."""
        await self.answer(await self.service.answer(self.json_body(), self.principal.owner))


def routes(*, models: ModelHub, chat_completions: ChatCompletions) -> list[Route]:
    """The models and chat-completions URL table (relative to the server's base URL)."""
    return [
        (r"/v1/models", ModelsHandler, {"models": models}),
        (r"/v1/models/(?P<model_id>.+)", ModelHandler, {"models": models}),
        (r"/v1/chat/completions", ChatCompletionsHandler, {"chat_completions": chat_completions}),
    ]

"""Thin Tornado handler of ``POST /v1/completions`` (legacy completions); ``routes`` last."""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel

from jupyter_superfluid.openai_api.completions import Completions
from jupyter_superfluid.openai_api.completions_protocol import CompletionRequest
from jupyter_superfluid.openai_api.handlers import OpenAIHandler
from jupyter_superfluid.web.base import Access, Route


class CompletionsHandler(OpenAIHandler):
    """``POST /v1/completions``."""

    scope = {"POST": "responses:write"}
    request_models: ClassVar[dict[str, type[BaseModel]]] = {"post": CompletionRequest}

    def initialize(self, access: Access, completions: Completions) -> None:
        """Receive the completions service."""
        self.access, self.service = access, completions

    async def post(self) -> None:
        """A text completion (fill-in-the-middle with ``suffix``), streamed or not."""
        await self.answer(await self.service.answer(self.json_body(), self.principal.owner))


def routes(*, completions: Completions) -> list[Route]:
    """The legacy completions URL table (relative to the server's base URL)."""
    return [(r"/v1/completions", CompletionsHandler, {"completions": completions})]

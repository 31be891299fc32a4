"""Thin Tornado handlers of ``/v1/responses…``."""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel

from jupyter_superfluid.openai_api.events import OPENRESPONSES_HEADER
from jupyter_superfluid.openai_api.handlers import OpenAIHandler
from jupyter_superfluid.openai_api.protocol import ResponseCreateRequest
from jupyter_superfluid.openai_api.responses import Responses
from jupyter_superfluid.web.base import Access, Route


class StoredResponsesHandler(OpenAIHandler):
    """Base of the ``/v1/responses…`` handlers: reading needs responses:read, the rest write."""

    scope = {"GET": "responses:read", "POST": "responses:write", "DELETE": "responses:write"}

    def initialize(self, access: Access, responses: Responses) -> None:
        """Receive the Responses service."""
        self.access, self.responses = access, responses


class ResponsesHandler(StoredResponsesHandler):
    """``POST /v1/responses`` (create) and ``GET /v1/responses`` (listing, an extension)."""

    request_models: ClassVar[dict[str, type[BaseModel]]] = {"post": ResponseCreateRequest}

    async def post(self) -> None:
        """Create a response, streamed or not."""
        named = OPENRESPONSES_HEADER in self.request.headers  # OpenResponses' event names
        await self.answer(
            await self.responses.answer(self.json_body(), self.principal, openresponses=named)
        )

    async def get(self) -> None:
        """Stored responses of this principal, newest first."""
        query = {k: self.get_query_argument(k) for k in self.request.query_arguments}
        self.write_json(await self.responses.listing(self.principal, query))


class ResponseHandler(StoredResponsesHandler):
    """``GET`` and ``DELETE /v1/responses/{id}``."""

    async def get(self, response_id: str) -> None:
        """The response object, or (``?stream=true``) a background response's events."""
        if self.get_query_argument("stream", "false").lower() == "true":
            after = self.get_query_argument("starting_after", None)
            await self.answer(
                await self.responses.background.events(response_id, self.principal, after)
            )
            return
        self.write_json(await self.responses.retrieve(response_id, self.principal))

    async def delete(self, response_id: str) -> None:
        """Delete the stored response."""
        self.write_json(await self.responses.delete(response_id, self.principal))


class InputItemsHandler(StoredResponsesHandler):
    """``GET /v1/responses/{id}/input_items``."""

    async def get(self, response_id: str) -> None:
        """The response's input items, paginated."""
        query = {k: self.get_query_argument(k) for k in self.request.query_arguments}
        self.write_json(await self.responses.input_items(response_id, self.principal, query))


class CancelHandler(StoredResponsesHandler):
    """``POST /v1/responses/{id}/cancel``: background responses only (else 400)."""

    async def post(self, response_id: str) -> None:
        """Cancel it, or return it unchanged once finished."""
        self.write_json(await self.responses.cancel(response_id, self.principal))


def routes(*, responses: Responses) -> list[Route]:
    """The Responses URL table (relative to the server's base URL)."""
    rid = r"(?P<response_id>[^/]+)"
    deps = {"responses": responses}
    return [
        (r"/v1/responses", ResponsesHandler, deps),
        (rf"/v1/responses/{rid}", ResponseHandler, deps),
        (rf"/v1/responses/{rid}/input_items", InputItemsHandler, deps),
        (rf"/v1/responses/{rid}/cancel", CancelHandler, deps),
    ]

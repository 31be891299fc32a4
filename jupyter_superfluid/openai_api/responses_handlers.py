"""Thin Tornado handlers of ``/v1/responses…``."""

from __future__ import annotations

import json
from typing import ClassVar

from pydantic import BaseModel

from ..errors import UnsupportedParameter
from .handlers import OpenAIHandler
from .protocol import ResponseCreateRequest


class ResponsesHandler(OpenAIHandler):
    """``POST /v1/responses`` (create) and ``GET /v1/responses`` (listing, an extension)."""

    request_models: ClassVar[dict[str, type[BaseModel]]] = {"post": ResponseCreateRequest}

    async def post(self) -> None:
        """Create a response, streamed or not."""
        service = self.services.responses
        rt = await service.prepare(self.json_body(), self.principal)
        if rt.req.stream:
            events = service.stream(rt)
            await self.pump_sse(_named(events), rt.turn, named=True)
            return
        body = await service.create(rt)
        self.set_header("x-superfluid-warm", str(rt.turn.result.usage.cached_tokens))
        self.write_json(body)

    async def get(self) -> None:
        """Stored responses of this principal, newest first."""
        query = {k: self.get_query_argument(k) for k in self.request.query_arguments}
        self.write_json(await self.services.responses.listing(self.principal, query))


async def _named(events):  # type: ignore[no-untyped-def]
    """Each event as ``name\\njson`` for ``pump_sse(named=True)``."""
    try:
        async for event in events:
            yield f"{event['type']}\n{json.dumps(event)}"
    finally:
        await events.aclose()


class ResponseHandler(OpenAIHandler):
    """``GET`` and ``DELETE /v1/responses/{id}``."""

    async def get(self, response_id: str) -> None:
        """The stored response object."""
        self.write_json(await self.services.responses.retrieve(response_id, self.principal))

    async def delete(self, response_id: str) -> None:
        """Delete the stored response."""
        self.write_json(await self.services.responses.delete(response_id, self.principal))


class InputItemsHandler(OpenAIHandler):
    """``GET /v1/responses/{id}/input_items``."""

    async def get(self, response_id: str) -> None:
        """The response's input items, paginated."""
        query = {k: self.get_query_argument(k) for k in self.request.query_arguments}
        self.write_json(
            await self.services.responses.input_items(response_id, self.principal, query)
        )


class CancelHandler(OpenAIHandler):
    """``POST /v1/responses/{id}/cancel``: background mode is not served."""

    async def post(self, response_id: str) -> None:
        """Always 400, as the spec says."""
        await self.services.responses.record(response_id, self.principal)
        raise UnsupportedParameter(
            "only background responses can be cancelled, and background mode is not served",
            param="response_id",
        )


def responses_routes() -> list[tuple[str, type[OpenAIHandler]]]:
    """The Responses URL table."""
    rid = r"(?P<response_id>[^/]+)"
    return [
        (r"/v1/responses", ResponsesHandler),
        (rf"/v1/responses/{rid}", ResponseHandler),
        (rf"/v1/responses/{rid}/input_items", InputItemsHandler),
        (rf"/v1/responses/{rid}/cancel", CancelHandler),
    ]

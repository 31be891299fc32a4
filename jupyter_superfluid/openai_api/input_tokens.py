"""``POST /v1/responses/input_tokens``: a Responses request's prompt, counted, not run.

The body is a ``POST /v1/responses`` body, validated as create validates it
(the same 400s, naming the same fields), its conversation resolved as create
resolves it (``previous_response_id`` honoured, forked or rebuilt) and its
prompt rendered and tokenized as create renders it: ``input_tokens`` equals the
``usage.input_tokens`` that creating the same request reports. Nothing is
generated or stored. The answer is OpenAI's ``{"object": "response.input_tokens",
"input_tokens": N}`` with one extension, ``context_window``: the model's context
size, which the prompt and the output share. It needs the scope
``responses:read``: it reads stored conversations and writes nothing.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel

from jupyter_superfluid.openai_api.handlers import OpenAIHandler
from jupyter_superfluid.openai_api.protocol import ResponseCreateRequest
from jupyter_superfluid.openai_api.responses import Responses
from jupyter_superfluid.web.auth import Principal
from jupyter_superfluid.web.base import Access, Route

SCOPE = "responses:read"


async def count_input_tokens(
    responses: Responses, body: dict[str, Any], principal: Principal
) -> dict[str, Any]:
    """The token count of ``body``'s prompt as create would render it, and the window."""
    _req, pt = await responses.prepare(body, principal)
    return {
        "object": "response.input_tokens",
        "input_tokens": len(pt.turn.prompt_tokens),
        "context_window": pt.turn.engine.info.context_size,
    }


class InputTokensHandler(OpenAIHandler):
    """``POST /v1/responses/input_tokens``."""

    scope = {"POST": SCOPE}
    request_models: ClassVar[dict[str, type[BaseModel]]] = {"post": ResponseCreateRequest}

    def initialize(self, access: Access, responses: Responses) -> None:
        """Receive the Responses service."""
        self.access, self.responses = access, responses

    async def post(self) -> None:
        """Count the prompt of a Responses request body."""
        self.write_json(await count_input_tokens(self.responses, self.json_body(), self.principal))


def routes(*, responses: Responses) -> list[Route]:
    """The route, to be served before ``/v1/responses/{id}`` (which would take its name)."""
    return [(r"/v1/responses/input_tokens", InputTokensHandler, {"responses": responses})]

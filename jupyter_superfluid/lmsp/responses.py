"""``/lmsp/v1/responses``: LMSP responses over the one chat path and the shared store.

``LmspResponses.prepare`` validates a request, checks the model's capabilities
and renders the prompt (continuing a stored conversation of either protocol);
``stream`` runs it as numbered LMSP events, committing the turn (and the stored
response, and an Idempotency-Key's result) before the final event is seen;
``create`` runs it to the end for a synchronous answer.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import Any

from ..chat.types import (
    ChatRequest,
    ChatSampling,
    Finished,
    OutputFormat,
    PromptProcessed,
)
from ..errors import InvalidRequest, NotFound, generation_error
from ..generation.continuation import load_continuation
from ..generation.items import preview, to_messages, to_tool_choice, to_tools, with_ids
from ..generation.models import ModelHub
from ..generation.prompting import Continuation
from ..generation.service import ChatService, Turn, ensure_messages
from ..sessions import NewResponse, ResponseNotFound, ResponseRecord, SessionNotFound, Store, new_id
from ..web.auth import Principal
from . import capabilities
from .events import LmspAssembler, Numbering, usage_object
from .idempotency import Claim
from .problems import generation_problem
from .protocol import (
    EXTENSION,
    LmspCreateRequest,
    SuperfluidExtension,
    parse_request,
    superfluid_extension,
)

Stamped = tuple[int, str, dict[str, Any]]


@dataclass
class LmspTurn:
    """A validated, rendered LMSP request and, as it runs, its events and result."""

    id: str
    req: LmspCreateRequest
    turn: Turn
    principal: Principal
    created_at: int
    assembler: LmspAssembler
    events: list[Stamped] = field(default_factory=list)
    body: dict[str, Any] | None = None  # the response object, once finished


def previous_not_found(prev_id: str) -> InvalidRequest:
    """An unknown, deleted, unstored or another principal's previous response."""
    return InvalidRequest(
        f"no stored response with id '{prev_id}' to continue",
        param="previous_response_id",
        code="response_not_found",
    )


class LmspResponses:
    """Create, stream and retrieve LMSP responses."""

    def __init__(self, chat: ChatService, store: Store, models: ModelHub) -> None:
        self.chat = chat
        self.store = store
        self.models = models

    async def prepare(
        self, body: dict[str, Any], principal: Principal, *, task: bool = False
    ) -> LmspTurn:
        """Validate ``body``, check capabilities, resolve its conversation, render it."""
        req = parse_request(body)
        ext = superfluid_extension(req)
        model = await self.models.get(req.model)
        caps = capabilities.model_capabilities(model.codec)
        capabilities.check(req.model, caps, req, ext, task=task)
        messages = to_messages(req.input)
        ensure_messages(messages, param="input")
        tools = to_tools([t.model_dump(exclude_none=True) for t in req.tools])
        choice = req.tool_choice
        raw_choice = choice if isinstance(choice, str) else choice.model_dump()
        cont = await self._continuation(req, principal)
        chat_request = ChatRequest(
            model=req.model,
            messages=messages,
            tools=tools,
            tool_choice=to_tool_choice(raw_choice, tools),
            output_format=_output_format(req),
            sampling=_sampling(req, ext),
            reasoning_effort=ext.reasoning_effort,
        )
        turn = await self.chat.prepare(chat_request, cont)
        rid = new_id("resp_")
        return LmspTurn(rid, req, turn, principal, int(time.time()), LmspAssembler(rid))

    async def _continuation(
        self, req: LmspCreateRequest, principal: Principal
    ) -> Continuation | None:
        if req.previous_response_id is None:
            return None
        found = await load_continuation(self.store, req.previous_response_id, principal.owner)
        if found is None:
            raise previous_not_found(req.previous_response_id)
        return found[0]

    # -- running ---------------------------------------------------------------

    async def stream(
        self, lt: LmspTurn, claim: Claim | None = None
    ) -> AsyncGenerator[Stamped, None]:
        """Run ``lt``: LMSP events numbered from 1, the final one after the commit."""
        numbering = Numbering()
        run = self.chat.run(lt.turn)
        try:
            async for event in run:
                if isinstance(event, PromptProcessed):
                    out = [lt.assembler.created()]
                elif isinstance(event, Finished):
                    out = [await self._finish(lt, event, claim, numbering.last + 1)]
                else:
                    out = lt.assembler.on(event)
                for item in out:
                    stamped = numbering.stamp(item)
                    lt.events.append(stamped)
                    yield stamped
        finally:
            await run.aclose()  # an early close cancels the generation at the next token

    async def create(self, lt: LmspTurn, claim: Claim | None = None) -> dict[str, Any]:
        """Run ``lt`` to the end; the response object, or a problem if generation failed."""
        async for _ in self.stream(lt, claim):
            pass
        assert lt.body is not None
        if lt.body["status"] == "failed":
            raise generation_error(lt.turn.result.reason, lt.turn.result.code)
        return lt.body

    async def _finish(
        self, lt: LmspTurn, fin: Finished, claim: Claim | None, final_id: int
    ) -> tuple[str, dict[str, Any]]:
        error = generation_problem(fin.reason) if fin.status == "failed" else None
        final = lt.assembler.final(fin, error)
        lt.body = self.response_object(lt, fin, error)
        if fin.status in ("completed", "incomplete"):
            result = None
            if claim is not None:
                replay: dict[str, Any]
                if lt.req.stream:
                    replay = {"kind": "stream", "events": [*lt.events, (final_id, *final)]}
                else:
                    replay = {"kind": "response", "body": lt.body}
                result = claim.result(replay)
            await self._commit(lt, lt.body, result)
            if claim is not None:
                claim.done = True
        return final

    def response_object(
        self, lt: LmspTurn, fin: Finished, error: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """The response object of 6.2 for a finished generation."""
        incomplete = None
        if fin.status == "incomplete":
            incomplete = {"reason": fin.reason or "max_output_tokens"}
        return {
            "id": lt.id,
            "object": "response",
            "created_at": lt.created_at,
            "status": fin.status,
            "model": lt.turn.request.model,
            "output": lt.assembler.output(),
            "usage": usage_object(fin.usage),
            "error": error,
            "incomplete_details": incomplete,
        }

    async def _commit(self, lt: LmspTurn, body: dict[str, Any], idempotency: Any) -> None:
        """Log the session and, when stored, the response: durable before visible."""
        record = None
        if lt.req.store:
            record = NewResponse(
                id=lt.id,
                model=body["model"],
                status=body["status"],
                body=body,
                input_items=with_ids(lt.req.input, lt.id),
                output_items=body["output"],
                previous_response_id=lt.req.previous_response_id,
                principal=lt.principal.owner,
                protocol="lmsp",
                created_at=lt.created_at,
                cached_tokens=lt.turn.result.usage.cached_tokens,
                preview=preview(lt.req.input, body["output"]),
            )
        try:
            await self.chat.commit(lt.turn, record, idempotency)
        except (ResponseNotFound, SessionNotFound) as err:
            # The previous response was deleted while this turn generated.
            raise previous_not_found(lt.req.previous_response_id or "") from err

    # -- stored responses ------------------------------------------------------

    async def retrieve(self, response_id: str, principal: Principal) -> dict[str, Any]:
        """``GET /lmsp/v1/responses/{id}``: a stored response of either protocol, or 404."""
        rec = await asyncio.to_thread(self.store.get_response, response_id, principal.owner)
        if rec is None:
            raise NotFound(
                f"no stored response with id '{response_id}'",
                param="response_id",
                code="response_not_found",
            )
        return stored_object(rec)


def stored_object(rec: ResponseRecord) -> dict[str, Any]:
    """A stored record as an LMSP response object (records of the OpenAI API too)."""
    if rec.protocol == "lmsp":
        return dict(rec.body)
    body = rec.body if isinstance(rec.body, dict) else {}
    usage = body.get("usage") or {}
    return {
        "id": rec.id,
        "object": "response",
        "created_at": int(rec.created_at),
        "status": rec.status,
        "model": rec.model,
        "output": [lmsp_item(item) for item in rec.output_items],
        "usage": {k: usage.get(k, 0) for k in ("input_tokens", "output_tokens", "total_tokens")},
        "error": None,
        "incomplete_details": body.get("incomplete_details"),
    }


def lmsp_item(item: dict[str, Any]) -> dict[str, Any]:
    """An output item of either protocol in LMSP's shape (6.2's item table)."""
    kind = item.get("type")
    if kind == "function_call":
        keys = ("id", "type", "call_id", "name", "arguments")
        return {k: item.get(k) for k in keys}
    parts = item.get("summary") or item.get("content") or []
    text = "".join(p.get("text", "") for p in parts if isinstance(p, dict))
    if kind == "reasoning":
        return {"id": item.get("id"), "type": "reasoning", "summary": _summary(text)}
    return {
        "id": item.get("id"),
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text}],
    }


def _summary(text: str) -> list[dict[str, str]]:
    return [{"type": "summary_text", "text": text}]


def _output_format(req: LmspCreateRequest) -> OutputFormat:
    fmt = req.response_format
    if fmt is None or fmt.type == "text" or fmt.json_schema is None:
        return OutputFormat()
    return OutputFormat(
        "json_schema",
        fmt.json_schema.schema_,
        fmt.json_schema.name,
        param="response_format.json_schema.schema",
    )


def _sampling(req: LmspCreateRequest, ext: SuperfluidExtension) -> ChatSampling:
    return ChatSampling(
        temperature=req.temperature,
        top_p=ext.top_p,
        seed=ext.seed,
        max_tokens=req.max_output_tokens,
        stop=tuple(ext.stop),
        logit_bias=_logit_bias(ext.logit_bias or {}),
    )


def _logit_bias(bias: dict[str, float]) -> tuple[tuple[int, float], ...]:
    # JSON object keys are strings; the token ids in them must be integers.
    if any(not key.isdigit() for key in bias):
        raise InvalidRequest(
            "logit_bias keys must be token ids", param=f"extensions.{EXTENSION}.logit_bias"
        )
    return tuple((int(key), value) for key, value in bias.items())

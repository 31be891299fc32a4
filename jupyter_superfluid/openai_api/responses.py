"""``/v1/responses``: the Responses API over the one chat path and the durable store.

``Responses.prepare`` validates a request and renders it (continuing a stored
conversation forked warm or rebuilt); ``create`` and ``stream`` run it and
store the response before the client sees it complete.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Any

from ..chat.types import ChatRequest, ChatSampling, Finished, PromptProcessed
from ..errors import InvalidRequest, NotFound, UnsupportedParameter, generation_error
from ..generation.continuation import load_continuation
from ..generation.items import (
    normalize_input,
    preview,
    to_messages,
    to_output_format,
    to_tool_choice,
    to_tools,
    with_ids,
)
from ..generation.models import ModelHub
from ..generation.prompting import Continuation
from ..generation.service import ChatService, Turn
from ..sessions import (
    NewResponse,
    ResponseNotFound,
    ResponseRecord,
    SessionNotFound,
    Store,
    new_id,
)
from ..web.auth import Principal
from .events import OutputAssembler, Sequencer
from .protocol import ListQuery, ResponseCreateRequest, parse
from .stored import openai_body

ECHOED = (
    "instructions",
    "tools",
    "tool_choice",
    "temperature",
    "top_p",
    "max_output_tokens",
    "metadata",
    "parallel_tool_calls",
    "truncation",
)


@dataclass
class ResponseTurn:
    """A validated, rendered Responses request."""

    id: str
    req: ResponseCreateRequest
    body: dict[str, Any]
    input_items: list[dict[str, Any]]
    turn: Turn
    principal: Principal
    created_at: int


def previous_not_found(prev_id: str) -> InvalidRequest:
    """The spec's error for an unknown, deleted or unstored previous response."""
    return InvalidRequest(
        f"previous response with id '{prev_id}' not found",
        param="previous_response_id",
        code="previous_response_not_found",
    )


class Responses:
    """Create, stream, retrieve, list and delete stored responses."""

    def __init__(self, chat: ChatService, store: Store, models: ModelHub) -> None:
        self.chat = chat
        self.store = store
        self.models = models

    # -- create ---------------------------------------------------------------

    async def prepare(self, body: dict[str, Any], principal: Principal) -> ResponseTurn:
        """Validate ``body``, resolve its conversation and render its prompt."""
        req = parse(ResponseCreateRequest, body)
        _refuse_unsupported(req)
        items = normalize_input(req.input)
        messages = to_messages(items)
        if not messages:
            raise InvalidRequest("input must not be empty", param="input")
        tools = to_tools(req.tools)
        cont, model = await self._continuation(req, principal)
        chat_request = ChatRequest(
            model=model,
            messages=messages,
            tools=tools,
            tool_choice=to_tool_choice(req.tool_choice, tools),
            output_format=to_output_format(body.get("text")),
            sampling=ChatSampling(
                req.temperature,
                req.top_p,
                req.seed,
                req.max_output_tokens,
                logit_bias=tuple((req.logit_bias or {}).items()),
            ),
            reasoning_effort=req.reasoning.effort if req.reasoning else None,
            instructions=req.instructions,
        )
        turn = await self.chat.prepare(chat_request, cont)
        rid = new_id("resp_")
        return ResponseTurn(rid, req, body, with_ids(items, rid), turn, principal, int(time.time()))

    async def _continuation(
        self, req: ResponseCreateRequest, principal: Principal
    ) -> tuple[Continuation | None, str]:
        if not req.previous_response_id:
            if not req.model:
                raise InvalidRequest("model is required", param="model")
            return None, req.model
        prev_id = req.previous_response_id
        found = await load_continuation(self.store, prev_id, principal.owner)
        if found is None:
            raise previous_not_found(prev_id)
        cont, prev = found
        return cont, req.model or prev.model

    def skeleton(self, rt: ResponseTurn, status: str) -> dict[str, Any]:
        """The response object without output, echoing the request as the spec says."""
        req = rt.req
        body: dict[str, Any] = {
            "id": rt.id,
            "object": "response",
            "created_at": rt.created_at,
            "status": status,
            "model": rt.turn.request.model,
            "previous_response_id": req.previous_response_id,
            "store": req.store,
            "background": False,
            "error": None,
            "incomplete_details": None,
            "output": [],
            "usage": None,
            "text": {"format": (rt.body.get("text") or {}).get("format") or {"type": "text"}},
            "reasoning": {
                "effort": req.reasoning.effort if req.reasoning else None,
                "summary": None,
            },
            "user": None,
        }
        for key in ECHOED:
            body[key] = getattr(req, key)
        body["metadata"] = req.metadata or {}
        return body

    def final_body(self, rt: ResponseTurn, assembler: OutputAssembler) -> dict[str, Any]:
        """The finished response object."""
        result = rt.turn.result
        body = self.skeleton(rt, result.status)
        body["output"] = assembler.output()
        if result.status == "incomplete":
            body["incomplete_details"] = {"reason": result.reason or "max_output_tokens"}
        if result.status == "failed":
            body["error"] = {"code": "server_error", "message": result.reason or "failed"}
        u = result.usage
        body["usage"] = {
            "input_tokens": u.input_tokens,
            "input_tokens_details": {
                "cached_tokens": u.cached_tokens,
                "cache_write_tokens": u.input_tokens - u.cached_tokens,
            },
            "output_tokens": u.output_tokens,
            "output_tokens_details": {"reasoning_tokens": u.reasoning_tokens},
            "total_tokens": u.total_tokens,
        }
        return body

    async def _commit(self, rt: ResponseTurn, body: dict[str, Any]) -> None:
        """Log the session and, when stored, the response: durable before visible."""
        record = None
        if rt.req.store and body["status"] in ("completed", "incomplete"):
            record = NewResponse(
                id=rt.id,
                model=body["model"],
                status=body["status"],
                body=body,
                input_items=rt.input_items,
                output_items=body["output"],
                previous_response_id=rt.req.previous_response_id,
                principal=rt.principal.owner,
                created_at=rt.created_at,
                cached_tokens=rt.turn.result.usage.cached_tokens,
                preview=preview(rt.input_items, body["output"]),
            )
        try:
            await self.chat.commit(rt.turn, record)
        except (ResponseNotFound, SessionNotFound) as err:
            # The previous response was deleted while this turn generated.
            raise previous_not_found(rt.req.previous_response_id or "") from err

    async def create(self, rt: ResponseTurn) -> dict[str, Any]:
        """Run to the end; the stored response object."""
        assembler = OutputAssembler(rt.id)
        async for event in self.chat.run(rt.turn):
            assembler.on(event)
        body = self.final_body(rt, assembler)
        if body["status"] == "failed":
            raise generation_error(rt.turn.result.reason, rt.turn.result.code)
        await self._commit(rt, body)
        return body

    async def stream(self, rt: ResponseTurn) -> AsyncGenerator[dict[str, Any], None]:
        """Stream events, numbered from 0; the final one after the response is stored."""
        seq = Sequencer()
        assembler = OutputAssembler(rt.id)
        events = self.chat.run(rt.turn)
        try:
            async for event in events:
                if isinstance(event, PromptProcessed):
                    start = self.skeleton(rt, "in_progress")
                    yield seq.stamp({"type": "response.created", "response": start})
                    yield seq.stamp({"type": "response.in_progress", "response": dict(start)})
                elif isinstance(event, Finished):
                    async for final in self._final_events(rt, assembler):
                        yield seq.stamp(final)
                else:
                    for out in assembler.on(event):
                        yield seq.stamp(out)
        finally:
            await events.aclose()

    async def _final_events(
        self, rt: ResponseTurn, assembler: OutputAssembler
    ) -> AsyncGenerator[dict[str, Any], None]:
        body = self.final_body(rt, assembler)
        if body["status"] == "failed":
            yield {
                "type": "error",
                "code": "server_error",
                "message": rt.turn.result.reason or "generation failed",
                "param": None,
            }
            yield {"type": "response.failed", "response": body}
            return
        if body["status"] == "cancelled":
            return
        await self._commit(rt, body)
        yield {"type": f"response.{body['status']}", "response": body}

    # -- stored objects -------------------------------------------------------

    async def record(self, response_id: str, principal: Principal) -> ResponseRecord:
        """A stored response visible to ``principal``, or 404."""
        rec = await asyncio.to_thread(self.store.get_response, response_id, principal.owner)
        if rec is None:
            raise NotFound(
                f"no response with id '{response_id}'",
                param="response_id",
                code="response_not_found",
            )
        return rec

    async def retrieve(self, response_id: str, principal: Principal) -> dict[str, Any]:
        """``GET /v1/responses/{id}``."""
        return openai_body(await self.record(response_id, principal))

    async def delete(self, response_id: str, principal: Principal) -> dict[str, Any]:
        """``DELETE /v1/responses/{id}``: remove the record, purge its session."""
        deleted = await asyncio.to_thread(self.store.delete_response, response_id, principal.owner)
        if not deleted:
            raise NotFound(
                f"no response with id '{response_id}'",
                param="response_id",
                code="response_not_found",
            )
        return {"id": response_id, "object": "response", "deleted": True}

    async def input_items(
        self, response_id: str, principal: Principal, query: dict[str, Any]
    ) -> dict[str, Any]:
        """``GET /v1/responses/{id}/input_items``, paginated."""
        q = parse(ListQuery, query)
        items = list((await self.record(response_id, principal)).input_items)
        if q.order == "desc":
            items.reverse()
        if q.after is not None:
            ids = [i.get("id") for i in items]
            if q.after not in ids:
                raise InvalidRequest(f"after: no input item '{q.after}'", param="after")
            items = items[ids.index(q.after) + 1 :]
        page = items[: q.limit]
        return {
            "object": "list",
            "data": page,
            "first_id": page[0]["id"] if page else None,
            "last_id": page[-1]["id"] if page else None,
            "has_more": len(items) > len(page),
        }

    async def listing(self, principal: Principal, query: dict[str, Any]) -> dict[str, Any]:
        """``GET /v1/responses``: stored responses newest first, for trees and history."""
        q = parse(ListQuery, query)
        try:
            records = await asyncio.to_thread(
                self.store.list_responses,
                principal.owner,
                limit=q.limit + 1,
                after=q.after,
                order=q.order,
            )
        except ResponseNotFound as err:
            raise InvalidRequest(f"after: no response '{q.after}'", param="after") from err
        has_more = len(records) > q.limit
        records = records[: q.limit]
        data = [
            {
                "id": r.id,
                "object": "response",
                "created_at": int(r.created_at),
                "model": r.model,
                "status": r.status,
                "previous_response_id": r.previous_response_id,
                "cached_tokens": r.cached_tokens,
                "preview": r.preview,
            }
            for r in records
        ]
        return {
            "object": "list",
            "data": data,
            "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None,
            "has_more": has_more,
        }


def _refuse_unsupported(req: ResponseCreateRequest) -> None:
    if req.background:
        raise UnsupportedParameter("background mode is not served", param="background")
    if req.conversation is not None:
        raise UnsupportedParameter(
            "conversation objects are not supported; use previous_response_id", param="conversation"
        )
    if req.prompt is not None:
        raise UnsupportedParameter("stored prompts are not supported", param="prompt")

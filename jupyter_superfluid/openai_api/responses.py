"""``/v1/responses``: the Responses API over the one chat path and stored turns.

``Responses.prepare`` validates a request and renders it (continuing a stored
conversation forked warm or rebuilt); ``create`` and ``stream`` run it through
``StoredTurns``, which stores the response before the client sees it complete.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping
from typing import Any

from jupyter_superfluid.chat.types import ChatRequest, ChatSampling
from jupyter_superfluid.errors import APIError, InvalidRequest, NotFound, UnsupportedParameter
from jupyter_superfluid.generation.items import (
    dump_items,
    messages_from_json,
    messages_off_the_loop,
    normalize_input,
    to_output_format,
    to_tool_choice,
    to_tools,
)
from jupyter_superfluid.generation.prompting import Continuation, ContinuationReader
from jupyter_superfluid.generation.stored_turns import PreparedTurn, SilentEncoder, StoredTurns
from jupyter_superfluid.generation.wire import FunctionTool
from jupyter_superfluid.openai_api.background import Background
from jupyter_superfluid.openai_api.compaction_blob import CompactionSigner
from jupyter_superfluid.openai_api.conversations import Conversations, ConversationTurn
from jupyter_superfluid.openai_api.events import DONE, ResponsesEncoder
from jupyter_superfluid.openai_api.paging import item_page, list_body
from jupyter_superfluid.openai_api.protocol import ListQuery, ResponseCreateRequest, parse
from jupyter_superfluid.openai_api.stored import listed_response, response_body
from jupyter_superfluid.store import ConversationAppend
from jupyter_superfluid.web.answer import Answer
from jupyter_superfluid.web.auth import Principal
from jupyter_superfluid.web.sse import SSE

ECHOED = (
    "instructions",
    "max_output_tokens",
    "max_tool_calls",
    "parallel_tool_calls",
    "truncation",
    "safety_identifier",
    "prompt_cache_key",
    "user",
)


class Responses:
    """Create, stream, retrieve, list and delete stored responses."""

    def __init__(
        self,
        turns: StoredTurns,
        conversations: Conversations,
        background: Background,
        signer: CompactionSigner | None = None,
    ) -> None:
        self.turns = turns
        self.conversations = conversations
        self.background = background
        self.signer = signer  # expands the compaction items of an input

    # -- create ---------------------------------------------------------------

    async def prepare(
        self,
        body: dict[str, Any],
        principal: Principal,
        *,
        local: Mapping[str, Continuation] | None = None,
        retain: bool = False,
    ) -> tuple[ResponseCreateRequest, PreparedTurn]:
        """Validate ``body``, resolve its conversation and render its prompt.

        ``local``: unstored responses a WebSocket connection can continue (warm);
        ``retain``: keep the turn's KV state although it is not stored.
        """
        if self.signer is not None:
            body = self.signer.expand(body)  # a compaction item: the summary it holds
        req = parse(ResponseCreateRequest, body)
        _refuse_unsupported(req)
        conv = await self._conversation(req, principal)
        history = conv.history if conv is not None else []
        items = normalize_input(req.input)
        messages = await messages_off_the_loop(items)
        if not messages:
            raise InvalidRequest("input must not be empty", param="input")
        tools = to_tools(req.tools)
        cont, previous_id, model = await self._start(req, conv, principal, local)
        chat_request = _chat_request(req, model, messages_from_json(history) + messages, tools)
        echo = _echo(req)
        if conv is not None:
            echo["conversation"] = {"id": conv.id}
        pt = await self.turns.prepare(
            chat_request,
            cont,
            owner=principal.owner,
            protocol="openai",
            store=req.store,
            previous_response_id=previous_id,
            input_items=history + dump_items(items),
            echo=echo,
            retain=retain,
        )
        if conv is not None:  # committed with the response: the conversation moves with it
            own = pt.input_items[len(history) :]
            pt.conversation = ConversationAppend(conv.id, own, rebase=conv.rebase)
        return req, pt

    async def _start(
        self,
        req: ResponseCreateRequest,
        conv: ConversationTurn | None,
        principal: Principal,
        local: Mapping[str, Continuation] | None,
    ) -> tuple[Continuation | ContinuationReader | None, str | None, str]:
        """What the turn continues (a stored response, or this connection's unstored one),
        the previous response's id and the model (named, or the one continued)."""
        previous_id = conv.previous_response_id if conv is not None else req.previous_response_id
        cont: Continuation | ContinuationReader | None
        if local is not None and previous_id is not None and previous_id in local:
            if req.store:
                raise InvalidRequest(
                    "a stored response cannot continue an unstored one",
                    param="previous_response_id",
                )
            cont = local[previous_id]
            continued = cont.meta.get("model")
        elif req.model and previous_id is not None:
            # The model is named: the stored conversation is read with the render (one hop).
            reader = self.turns.continuation_reader(previous_id, principal.owner)
            return reader, previous_id, req.model
        else:
            cont, prev = await self.turns.continuation(previous_id, principal.owner)
            continued = prev.model if prev is not None else None
        model = req.model or continued or (conv.model if conv is not None else None)
        if not model:
            raise InvalidRequest("model is required", param="model")
        return cont, previous_id, model

    async def _conversation(
        self, req: ResponseCreateRequest, principal: Principal
    ) -> ConversationTurn | None:
        """Where a response created in a conversation starts (None outside one)."""
        if req.conversation is None:
            if req.branch_from_root:
                raise InvalidRequest("branch_from_root needs a conversation", param="conversation")
            return None
        if not req.store:
            raise InvalidRequest(
                "a response in a conversation is stored: store cannot be false", param="store"
            )
        # An extension: with a previous response of its own, a conversation branches there.
        return await self.conversations.turn(
            req.conversation,
            principal,
            fork_from=req.previous_response_id,
            from_root=req.branch_from_root,
        )

    async def answer(
        self, body: dict[str, Any], principal: Principal, *, openresponses: bool = False
    ) -> Answer:
        """A response for ``body``: its events when it streams (``openresponses``: with
        OpenResponses' event names), else the response object."""
        req, pt = await self.prepare(body, principal)
        if req.background:
            return await self.background.start(pt, stream=req.stream)
        if req.stream:
            return self.stream(pt, openresponses=openresponses)
        return Answer(body=await self.create(pt), warm=lambda: pt.turn.result.usage.cached_tokens)

    async def create(self, pt: PreparedTurn) -> dict[str, Any]:
        """Run to the end; the stored response object."""
        return response_body(await self.turns.complete(pt, SilentEncoder()))

    def stream(self, pt: PreparedTurn, *, openresponses: bool = False) -> Answer:
        """Its events numbered from 0, the final one after the response is stored, then
        ``[DONE]``; and the events (and ``[DONE]``) that end it on an error after it began."""
        encoder = ResponsesEncoder(pt.id, openresponses=openresponses)

        async def batches() -> AsyncGenerator[list[SSE], None]:
            run = self.turns.run(pt, encoder)
            try:
                async for batch in run:
                    yield [SSE.json(e, event=e["type"]) for e in batch]
            finally:
                await run.aclose()
            yield [DONE]

        def on_error(err: APIError) -> list[SSE]:
            events = encoder.error(err.code, err.message, err.param, err.type)
            return [*(SSE.json(e, event=e["type"]) for e in events), DONE]

        return Answer(batches=batches(), warm=lambda: pt.turn.cached_tokens, on_error=on_error)

    # -- stored objects -------------------------------------------------------

    async def retrieve(self, response_id: str, principal: Principal) -> dict[str, Any]:
        """``GET /v1/responses/{id}``: stored, or a background response's state."""
        try:
            return response_body(await self.turns.retrieve(response_id, principal.owner))
        except NotFound:
            body = await self.background.body(response_id, principal)
            if body is None:
                raise
            return body

    async def cancel(self, response_id: str, principal: Principal) -> dict[str, Any]:
        """``POST /v1/responses/{id}/cancel``: a background response, cancelled unless done."""
        if not await self.background.cancel(response_id, principal):
            await self.check_exists(response_id, principal)
            raise UnsupportedParameter(
                "only background responses can be cancelled", param="response_id"
            )
        return await self.retrieve(response_id, principal)

    async def check_exists(self, response_id: str, principal: Principal) -> None:
        """404 unless ``response_id`` is a stored response ``principal`` sees."""
        await self.turns.record(response_id, principal.owner)

    async def delete(self, response_id: str, principal: Principal) -> dict[str, Any]:
        """``DELETE /v1/responses/{id}``: remove the record, purge its session."""
        await self.turns.delete(response_id, principal.owner)
        return {"id": response_id, "object": "response", "deleted": True}

    async def input_items(
        self, response_id: str, principal: Principal, query: dict[str, Any]
    ) -> dict[str, Any]:
        """``GET /v1/responses/{id}/input_items``, paginated."""
        q = parse(ListQuery, query)
        items = list((await self.turns.record(response_id, principal.owner)).input_items)
        return item_page(items, q)

    async def listing(self, principal: Principal, query: dict[str, Any]) -> dict[str, Any]:
        """``GET /v1/responses``: stored responses newest first, for trees and history."""
        q = parse(ListQuery, query)
        records, has_more = await self.turns.listing(
            principal.owner, limit=q.limit, after=q.after, order=q.order
        )
        data = [listed_response(r) for r in records]
        return list_body(data, has_more)


def _chat_request(
    req: ResponseCreateRequest, model: str, messages: tuple[Any, ...], tools: tuple[Any, ...]
) -> ChatRequest:
    """The neutral chat request of a validated create body."""
    fmt = req.text.format if req.text is not None else None
    return ChatRequest(
        model=model,
        messages=messages,
        tools=tools,
        tool_choice=to_tool_choice(req.tool_choice, tools),
        output_format=to_output_format(fmt),
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


def _echo(req: ResponseCreateRequest) -> dict[str, Any]:
    """The request's parameters a response object echoes (as OpenResponses lists them)."""
    echo: dict[str, Any] = {key: getattr(req, key) for key in ECHOED}
    echo["tools"] = [_echo_tool(t) for t in req.tools]
    choice = req.tool_choice
    echo["tool_choice"] = (
        choice if isinstance(choice, str) else choice.model_dump(exclude_none=True)
    )
    fmt = req.text.format if req.text is not None else None
    echo["text"] = {"format": _echo_format(fmt)}
    echo["reasoning"] = {
        "effort": req.reasoning.effort if req.reasoning else None,
        "summary": req.reasoning.summary if req.reasoning else None,
    }
    echo["metadata"] = req.metadata or {}
    echo["top_logprobs"] = req.top_logprobs or 0
    echo["presence_penalty"] = req.presence_penalty or 0.0
    echo["frequency_penalty"] = req.frequency_penalty or 0.0
    echo["service_tier"] = "default"  # the one tier served, whatever was asked
    return echo


def _echo_tool(tool: Any) -> dict[str, Any]:
    """A tool as given, with every field of a function tool present (``strict``: as given,
    else false: outside forced calls, arguments are parsed, not grammar-constrained)."""
    if isinstance(tool, FunctionTool):
        return {
            "type": "function",
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters,
            "strict": bool(tool.strict),
        }
    return tool.model_dump(by_alias=True, exclude_none=True)


def _echo_format(fmt: Any) -> dict[str, Any]:
    if fmt is None:
        return {"type": "text"}
    if fmt.type != "json_schema":
        return {"type": fmt.type}
    return {
        "type": "json_schema",
        "name": fmt.name,
        "description": fmt.description,
        "schema": fmt.schema_,
        "strict": bool(fmt.strict),
    }


def _refuse_unsupported(req: ResponseCreateRequest) -> None:
    if req.background and not req.store:
        raise InvalidRequest(
            "a background response is stored: store cannot be false", param="store"
        )
    if req.prompt is not None:
        raise UnsupportedParameter("stored prompts are not supported", param="prompt")

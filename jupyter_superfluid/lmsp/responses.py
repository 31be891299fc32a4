"""``/lmsp/v1/responses``: LMSP responses over the one chat path and stored turns.

``LmspResponses.prepare`` validates a request, checks the model's capabilities
and renders the prompt (continuing a stored conversation of either protocol);
``stream`` runs it as numbered LMSP events through the stored turns, which commits
the turn (and the stored response, and an Idempotency-Key's result) before the
final event is seen; ``create`` runs it to the end for a synchronous answer.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Any

from jupyter_superfluid.chat.types import ChatRequest, ChatSampling, OutputFormat
from jupyter_superfluid.generation.items import messages_from_items, to_tool_choice, to_tools
from jupyter_superfluid.generation.service import ensure_messages
from jupyter_superfluid.generation.stored_turns import PreparedTurn, StoredTurns
from jupyter_superfluid.lmsp import capabilities
from jupyter_superfluid.lmsp.events import LmspEncoder, Stamped, response_object
from jupyter_superfluid.lmsp.idempotency import Claim
from jupyter_superfluid.lmsp.protocol import (
    LmspCreateRequest,
    SuperfluidExtension,
    input_items,
    parse_request,
    superfluid_extension,
)
from jupyter_superfluid.lmsp.streams import events_answer
from jupyter_superfluid.models.hub import ModelHub
from jupyter_superfluid.store import IdempotentResult
from jupyter_superfluid.validation import check_schema
from jupyter_superfluid.web.answer import Answer
from jupyter_superfluid.web.auth import Principal


@dataclass
class LmspTurn:
    """A validated, rendered LMSP request, and its encoder (which keeps its events)."""

    req: LmspCreateRequest
    prepared: PreparedTurn
    encoder: LmspEncoder

    @property
    def id(self) -> str:
        """The response id."""
        return self.prepared.id

    @property
    def body(self) -> dict[str, Any] | None:
        """The response object, once finished."""
        resp = self.prepared.response
        return response_object(resp) if resp is not None else None


class LmspResponses:
    """Create, stream and retrieve LMSP responses."""

    def __init__(self, turns: StoredTurns, models: ModelHub) -> None:
        self.turns = turns
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
        messages = messages_from_items(req.input)  # wire's items, as validated
        ensure_messages(messages, param="input")
        tools = to_tools(req.tools)
        previous = req.previous_response_id
        # Read with the render, in one hop off the event loop.
        cont = self.turns.continuation_reader(previous, principal.owner) if previous else None
        chat_request = ChatRequest(
            model=req.model,
            messages=messages,
            tools=tools,
            tool_choice=to_tool_choice(req.tool_choice, tools),
            output_format=_output_format(req),
            sampling=_sampling(req, ext),
            reasoning_effort=ext.reasoning_effort,
        )
        prepared = await self.turns.prepare(
            chat_request,
            cont,
            owner=principal.owner,
            protocol="lmsp",
            store=req.store,
            previous_response_id=req.previous_response_id,
            input_items=input_items(req),
            echo={},
        )
        return LmspTurn(req, prepared, LmspEncoder(prepared.id))

    # -- running ---------------------------------------------------------------

    async def answer(self, lt: LmspTurn, claim: Claim | None = None) -> Answer:
        """Run ``lt``: its numbered events when it streams, else the response object."""
        if lt.req.stream:
            turn = lt.prepared.turn
            return events_answer(
                self.stream(lt, claim), warm=lambda: turn.cached_tokens, on_error=lt.encoder.error
            )
        body = await self.create(lt, claim)
        return Answer(body=body, warm=lambda: lt.prepared.turn.result.usage.cached_tokens)

    async def stream(
        self, lt: LmspTurn, claim: Claim | None = None
    ) -> AsyncGenerator[list[Stamped], None]:
        """Run ``lt``: batches of LMSP events numbered from 1, the final one after the commit."""
        run = self.turns.run(lt.prepared, lt.encoder, _replay(lt, claim))
        try:
            async for batch in run:
                _settle(lt, claim)
                yield batch
        finally:
            await run.aclose()  # an early close cancels the generation at the next token

    async def create(self, lt: LmspTurn, claim: Claim | None = None) -> dict[str, Any]:
        """Run ``lt`` to the end; the response object, or a problem if generation failed."""
        resp = await self.turns.complete(lt.prepared, lt.encoder, _replay(lt, claim))
        _settle(lt, claim)
        return response_object(resp)

    async def retrieve(self, response_id: str, principal: Principal) -> dict[str, Any]:
        """``GET /lmsp/v1/responses/{id}``: a stored response of either protocol, or 404."""
        return response_object(await self.turns.retrieve(response_id, principal.owner))


def _replay(lt: LmspTurn, claim: Claim | None) -> Any:
    """The Idempotency-Key record to commit with the turn: what a retry gets back."""
    if claim is None:
        return None

    def record(final: list[Stamped]) -> IdempotentResult:
        replay: dict[str, Any]
        if lt.req.stream:
            replay = {"kind": "stream", "events": list(lt.encoder.events)}
        else:
            replay = {"kind": "response", "body": lt.body}
        return claim.result(replay)

    return record


def _settle(lt: LmspTurn, claim: Claim | None) -> None:
    """Once the turn is committed, its claim is done (its result was committed with it)."""
    resp = lt.prepared.response
    if claim is not None and resp is not None and resp.status in ("completed", "incomplete"):
        claim.done = True


def _output_format(req: LmspCreateRequest) -> OutputFormat:
    fmt = req.response_format
    if fmt is None or fmt.type == "text" or fmt.json_schema is None:
        return OutputFormat()
    param = "response_format.json_schema.schema"
    check_schema(fmt.json_schema.schema_, param)
    return OutputFormat("json_schema", fmt.json_schema.schema_, fmt.json_schema.name, param=param)


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
    # JSON object keys are strings; the model checked that each is a token id's digits.
    return tuple((int(key), value) for key, value in bias.items())

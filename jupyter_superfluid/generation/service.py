"""The one chat path: a neutral chat request → engine → neutral events → a logged session.

Every protocol (chat completions, Responses, LMSP) calls ``ChatService``:
``prepare`` renders and tokenizes (fresh, rebuilt or forked warm), ``run``
streams neutral ``ChatEvent`` values ending in ``Finished``, and ``commit``
writes the turn's session events, and the protocol's stored record if any, in
one transaction — before the protocol shows the client the final result.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import Any, NoReturn

from jupyter_superfluid.chat.codec import ChatCodec
from jupyter_superfluid.chat.environment import TemplateRefusal
from jupyter_superfluid.chat.sampling import grammar_for, sampling_for
from jupyter_superfluid.chat.stops import StopFilter
from jupyter_superfluid.chat.types import (
    ChatEvent,
    ChatMessage,
    ChatRequest,
    OutputItem,
    PromptProcessed,
    ToolCall,
    ToolSpec,
)
from jupyter_superfluid.engine.base import (
    ContextOverflowError,
    Engine,
    EngineError,
    EngineUnavailableError,
    GenerateRequest,
)
from jupyter_superfluid.errors import (
    ContextLengthExceeded,
    EngineUnavailable,
    InvalidRequest,
    generation_error,
)
from jupyter_superfluid.generation import media as media_input
from jupyter_superfluid.generation.cache_salt import CacheSalts
from jupyter_superfluid.generation.decode import TurnResult, run_generation
from jupyter_superfluid.generation.prompt_tokens import prompt_tokens
from jupyter_superfluid.generation.prompting import (
    Continuation,
    ContinuationReader,
    Prompt,
    PromptBuilder,
    PromptEvent,
    PromptSplit,
    head_key,
    message_item,
)
from jupyter_superfluid.models.hub import LoadedModel, ModelHub
from jupyter_superfluid.store import (
    Event,
    IdempotentResult,
    NewResponse,
    NewSession,
    Store,
    new_id,
)

log = logging.getLogger(__name__)


@dataclass
class Turn:
    """One prepared request: its model, prompt, sampling and (after ``run``) result."""

    request: ChatRequest
    engine: Engine
    codec: ChatCodec
    builder: PromptBuilder
    prompt: Prompt
    tools: tuple[ToolSpec, ...]
    kwargs: dict[str, Any]
    head: str
    forked: bool
    opens_reasoning: bool
    generate: GenerateRequest
    result: TurnResult = field(default_factory=TurnResult)
    session_id: str = ""
    cached_tokens: int = 0  # known once the engine has evaluated the prompt

    @property
    def prompt_tokens(self) -> list[int]:
        """The prompt's token ids, as the engine receives them."""
        return list(self.generate.prompt_tokens)


class ChatService:
    """Runs neutral chat requests on the shared models and logs their sessions."""

    def __init__(
        self,
        models: ModelHub,
        store: Store,
        *,
        default_max_tokens: int = 0,
        salts: CacheSalts | None = None,
    ) -> None:
        self.models = models
        self.store = store
        self.default_max_tokens = default_max_tokens
        # Per-principal prefix-cache salts (shared engines: vLLM), keyed in the store.
        self.salts = salts or CacheSalts.in_directory(store.root)

    async def prepare(
        self,
        request: ChatRequest,
        continuation: Continuation | ContinuationReader | None = None,
        *,
        retain: bool = False,
        owner: str | None = None,
    ) -> Turn:
        """Render and tokenize ``request`` (continuing ``continuation`` if given, read
        first if it is still to be read).

        ``retain``: the turn will be stored and can be continued, so the engine
        keeps its KV state (one-off turns leave only the prefixes that recur).
        ``owner``: the principal's store owner, whose cache salt the request carries.
        """
        model = await self.models.get(request.model)
        codec = model.codec
        kwargs = codec.template_kwargs_for_effort(request.reasoning_effort)
        tools = request.tools if request.tool_choice.mode != "none" else ()
        head = head_key(request.instructions, tools, kwargs)
        builder = PromptBuilder(
            codec,
            prompt_tokens(model.engine),
            functools.partial(media_input.tokenize, model.engine),
        )
        lead = (ChatMessage("system", request.instructions),) if request.instructions else ()
        # Reading a stored conversation, rendering and tokenizing it is real work: off the
        # event loop, in one hop (each hop costs a thread's and the loop's wake-up).
        try:
            prompt, forked, suffix = await asyncio.to_thread(
                self._build_prompt,
                builder,
                lead,
                request.messages,
                continuation,
                tools,
                kwargs,
                head,
                model,
            )
        except EngineUnavailableError as err:  # the engine process is restarting
            raise EngineUnavailable(str(err), code=err.code) from err
        except TemplateRefusal as err:
            raise InvalidRequest(str(err), param="input", code="template_refused") from err
        opens = codec.generation_opens_reasoning(kwargs)
        grammar = grammar_for(request, tools, codec, opens_reasoning=opens)
        context = model.engine.info.context_size
        if len(prompt.tokens) >= context:
            raise ContextLengthExceeded(
                f"the prompt has {len(prompt.tokens)} tokens; the context window of "
                f"{request.model} is {context}",
                param="input",
            )
        _check_logit_bias(request, model.engine.info.n_vocab)
        sampling = sampling_for(
            request.sampling, grammar, self.default_max_tokens, room=context - len(prompt.tokens)
        )
        return Turn(
            request,
            model.engine,
            codec,
            builder,
            prompt,
            tools,
            kwargs,
            head,
            forked,
            opens,
            GenerateRequest(
                tuple(prompt.tokens),
                sampling,
                cache_suffix=tuple(suffix),
                media=prompt.media,
                retain=retain,
                cache_salt=self.salts.salt(owner),
            ),
        )

    def _build_prompt(
        self,
        builder: PromptBuilder,
        lead: tuple[ChatMessage, ...],
        new: tuple[ChatMessage, ...],
        continuation: Continuation | ContinuationReader | None,
        tools: tuple[ToolSpec, ...],
        kwargs: dict,
        head: str,
        model: LoadedModel,
    ) -> tuple[Prompt, bool, list[int]]:
        """The prompt, whether it forks the stored session, and the closing to cache."""
        cont = continuation() if callable(continuation) else continuation
        prompt: Prompt | None = None
        prior = cont.messages if cont is not None else ()
        media = media_input.gather(prior + new)
        media_input.check_kinds(media, model.engine.info)
        if media:
            prompt = builder.with_media(lead, prior + new, tools, kwargs)
            return prompt, False, builder.expected_closing(prompt, tools, kwargs)
        if cont is not None and self._can_fork(cont, builder, head, model.id):
            assert cont.session_id is not None
            stored = self.store.session_tokens(cont.session_id, cont.end)
            prompt = builder.fork(cont, stored, lead, new, tools, kwargs)
        forked = prompt is not None
        split = _split_of(cont, head, model.id) if prompt is None else None
        if split is not None and cont is not None and cont.session_id is not None:
            stored = self.store.session_tokens(cont.session_id, cont.end)
            prompt = builder.extend(split, stored, lead + prior + new, tools, kwargs)
        if prompt is None:
            prompt = builder.fresh(lead, prior + new, tools, kwargs)
        return prompt, forked, builder.expected_closing(prompt, tools, kwargs)

    @staticmethod
    def _can_fork(cont: Continuation, builder: PromptBuilder, head: str, model_id: str) -> bool:
        meta = cont.meta
        return bool(
            cont.session_id
            and cont.completed
            and builder.codec.renders_per_message
            and meta.get("forkable")
            and meta.get("model") == model_id
            and meta.get("head") == head
        )

    async def run(self, turn: Turn) -> AsyncGenerator[ChatEvent, None]:
        """Generate, yielding neutral events; the last one is ``Finished``.

        Closing this iterator early cancels the generation at the next token.
        """
        parser = turn.codec.output_parser(
            turn.tools, opens_reasoning=turn.opens_reasoning, forced_call=forces_call(turn)
        )
        stops = StopFilter(turn.request.sampling.stop)

        def refuse(err: EngineError) -> NoReturn:
            raise_refusal(turn, err)

        events = run_generation(turn.engine, turn.generate, parser, stops, turn.result, refuse)
        try:
            async for event in events:
                if isinstance(event, PromptProcessed):
                    turn.cached_tokens = event.cached_tokens
                yield event
        finally:
            await events.aclose()

    async def collect(self, turn: Turn) -> TurnResult:
        """Run to the end, for non-streaming callers."""
        async for _ in self.run(turn):
            pass
        if turn.result.status == "failed":
            raise generation_error(turn.result.reason, turn.result.code)
        return turn.result

    async def commit(
        self,
        turn: Turn,
        record: NewResponse | None = None,
        idempotency: IdempotentResult | None = None,
    ) -> str:
        """Log the session (and ``record``, ``idempotency``) in one commit; the session id."""
        return await asyncio.to_thread(self._commit_sync, turn, record, idempotency)

    def _commit_sync(
        self, turn: Turn, record: NewResponse | None, idempotency: IdempotentResult | None = None
    ) -> str:
        assistant = assistant_message(turn.result.items)
        closing = None
        if turn.result.status == "completed":
            try:
                closing = turn.builder.closing(
                    turn.prompt, turn.result.generated_text, assistant, turn.tools, turn.kwargs
                )
            except EngineUnavailableError:  # the turn is whole; only its fork point is lost
                log.warning("superfluid: no engine to tokenize the closing; stored unforkable")
        output = PromptEvent(
            "output",
            message_item(assistant),
            turn.prompt.gen_prompt + turn.result.generated + (closing or []),
        )
        meta = {
            "model": turn.request.model,
            "head": turn.head,
            "forkable": closing is not None,
            "forked": turn.forked,
        }
        if turn.prompt.split is not None:
            meta["split"] = turn.prompt.split.to_meta()
        parent_id, parent_len = turn.prompt.parent or (None, 0)
        session = NewSession(
            id=new_id("sess"),
            model=turn.request.model,
            parent_id=parent_id,
            parent_len=parent_len,
            meta=meta,
        )
        events = [
            Event(kind=e.kind, tokens=tuple(e.tokens), item=e.item)  # type: ignore[arg-type]
            for e in [*turn.prompt.events, output]
        ]
        self.store.commit_turn(session, events, record, idempotency=idempotency)
        turn.session_id = session.id
        return session.id


def assistant_message(items: list[OutputItem]) -> ChatMessage:
    """The assistant turn that a turn's output items make up."""
    reasoning = "".join(i.text for i in items if i.kind == "reasoning") or None
    text = "".join(i.text for i in items if i.kind == "message")
    calls = tuple(
        ToolCall(
            call_id=i.call_id or "", name=i.name or "", arguments=i.text, namespace=i.namespace
        )
        for i in items
        if i.kind == "function_call"
    )
    return ChatMessage("assistant", text, reasoning=reasoning, tool_calls=calls)


def _split_of(cont: Continuation | None, head: str, model_id: str) -> PromptSplit | None:
    """Where a stored turn's prompt can be extended: a whole prompt of this model and head
    (where a fork can be taken, it is). Only its prompt is kept, so a reply the token cap
    cut is no hindrance: the reply is rendered again from its stored items."""
    if cont is None or not cont.session_id:
        return None
    meta = cont.meta
    if meta.get("model") != model_id or meta.get("head") != head:
        return None
    return PromptSplit.from_meta(meta.get("split"))


def _check_logit_bias(request: ChatRequest, n_vocab: int) -> None:
    for token, bias in request.sampling.logit_bias:
        if n_vocab and not 0 <= token < n_vocab:
            raise InvalidRequest(
                f"logit_bias: token {token} is outside the vocabulary (0..{n_vocab - 1})",
                param="logit_bias",
            )
        if not -100 <= bias <= 100:
            raise InvalidRequest(
                "logit_bias values must be between -100 and 100", param="logit_bias"
            )


def raise_refusal(turn: Turn, err: EngineError) -> NoReturn:
    """Raise the client error of a generation the engine refused before it began."""
    if isinstance(err, EngineUnavailableError):
        raise EngineUnavailable(str(err), code=err.code) from err
    if isinstance(err, ContextOverflowError):
        raise ContextLengthExceeded(str(err), param="input") from err
    if turn.generate.sampling.grammar is None:
        raise err
    # The engine could not compile the grammar a schema became (too complex).
    param = grammar_param(turn)
    raise InvalidRequest(
        f"{param}: the JSON schema cannot be enforced: {err}", param=param
    ) from err


def forces_call(turn: Turn) -> bool:
    """Whether the turn's grammar forces a tool call (tool_choice required or a function)."""
    return bool(turn.tools) and turn.request.tool_choice.mode in ("required", "function")


def grammar_param(turn: Turn) -> str:
    """The request field whose schema became the turn's grammar."""
    return "tools" if forces_call(turn) else turn.request.output_format.param


def ensure_messages(messages: tuple[ChatMessage, ...], param: str = "messages") -> None:
    """A request needs at least one message."""
    if not messages:
        raise InvalidRequest("at least one message is required", param=param)

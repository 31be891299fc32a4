"""``/v1/completions``: OpenAI's legacy completions over the engine seam, fill-in-the-middle too.

A text prompt is tokenized as llama-server's ``/completion`` does (control tokens
parsed, BOS when the model adds one); token ids go as they are. With ``suffix`` the
prompt becomes ``<FIM_PRE> prefix <FIM_SUF> suffix <FIM_MID>`` (``generation.fim``),
and a model without FIM tokens refuses it. Generation is the shared
``generation.decode.run_generation`` with a raw-text parser: the text is the model's,
cut at a stop string, its end-of-generation token dropped. Nothing is stored.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import Any, NoReturn

from jupyter_superfluid.chat.parsers import END_OF_TURN
from jupyter_superfluid.chat.sampling import sampling_for
from jupyter_superfluid.chat.stops import StopFilter
from jupyter_superfluid.chat.types import (
    ChatEvent,
    ChatSampling,
    Finished,
    PromptProcessed,
    TextDelta,
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
    UnsupportedParameter,
    generation_error,
)
from jupyter_superfluid.generation.cache_salt import CacheSalts
from jupyter_superfluid.generation.decode import RawText, TurnResult, run_generation
from jupyter_superfluid.generation.fim import fim_prompt, fim_tokens, text_tokens
from jupyter_superfluid.models.hub import ModelHub
from jupyter_superfluid.openai_api.chat_completions import finish_reason, stream_error, usage_body
from jupyter_superfluid.openai_api.completions_protocol import CompletionRequest
from jupyter_superfluid.validation import parse
from jupyter_superfluid.web.answer import Answer
from jupyter_superfluid.web.sse import SSE

__all__ = ["Completion", "Completions"]

DEFAULT_MAX_TOKENS = 16  # OpenAI's, for a request that names no max_tokens
# The one served value of each: anything else is 400 unsupported_parameter.
SERVED_ONLY = {"n": 1, "echo": False, "logprobs": None, "best_of": 1}


@dataclass
class Completion:
    """One prepared completion: its request, engine and tokenized generation (then result)."""

    request: CompletionRequest
    engine: Engine
    generate: GenerateRequest
    result: TurnResult = field(default_factory=TurnResult)
    cached_tokens: int = 0  # known once the engine has evaluated the prompt
    id: str = field(default_factory=lambda: "cmpl-" + secrets.token_hex(12))
    created: int = field(default_factory=lambda: int(time.time()))


class Completions:
    """The legacy completions endpoint's logic, on the served models."""

    def __init__(
        self,
        models: ModelHub,
        *,
        default_max_tokens: int = DEFAULT_MAX_TOKENS,
        salts: CacheSalts | None = None,
    ) -> None:
        self.models = models
        self.default_max_tokens = default_max_tokens
        self.salts = salts  # per-principal prefix-cache salts (the chat path's)

    async def prepare(self, body: dict[str, Any], owner: str | None = None) -> Completion:
        """Validate and tokenize a request (400 for what is not served or does not fit).

        ``owner``: the principal's store owner, whose cache salt the request carries.
        """
        req = parse(CompletionRequest, body)
        check_served(req)
        engine = (await self.models.get(req.model)).engine
        try:
            tokens = await asyncio.to_thread(prompt_tokens, engine, req)
        except EngineUnavailableError as err:  # the engine process is restarting
            raise EngineUnavailable(str(err), code=err.code) from err
        context = engine.info.context_size
        if len(tokens) >= context:
            raise ContextLengthExceeded(
                f"the prompt has {len(tokens)} tokens; the context window of "
                f"{req.model} is {context}",
                param="prompt",
            )
        _check_logit_bias(req, engine.info.n_vocab)
        asked = ChatSampling(
            req.temperature,
            req.top_p,
            req.seed,
            req.max_tokens or self.default_max_tokens,
            _stops(req),
            tuple((req.logit_bias or {}).items()),
        )
        sampling = sampling_for(asked, None, self.default_max_tokens, room=context - len(tokens))
        salt = self.salts.salt(owner) if self.salts is not None else None
        return Completion(req, engine, GenerateRequest(tuple(tokens), sampling, cache_salt=salt))

    async def answer(self, body: dict[str, Any], owner: str | None = None) -> Answer:
        """A completion for ``body``: its chunks when it streams, else the object."""
        c = await self.prepare(body, owner)
        if c.request.stream:
            return Answer(
                batches=self.stream(c), warm=lambda: c.cached_tokens, on_error=stream_error
            )
        completion = await self.complete(c)
        return Answer(body=completion, warm=lambda: c.result.usage.cached_tokens)

    async def run(self, c: Completion) -> AsyncGenerator[ChatEvent, None]:
        """Generate, yielding neutral events (text deltas); the last one is ``Finished``."""
        info = c.engine.info
        parser = RawText((info.eos_token, *END_OF_TURN))
        stops = StopFilter(_stops(c.request))
        events = run_generation(c.engine, c.generate, parser, stops, c.result, _refuse)
        try:
            async for event in events:
                if isinstance(event, PromptProcessed):
                    c.cached_tokens = event.cached_tokens
                yield event
        finally:
            await events.aclose()

    async def complete(self, c: Completion) -> dict[str, Any]:
        """Run to the end; the ``text_completion`` object."""
        texts = [e.text async for e in self.run(c) if isinstance(e, TextDelta)]
        if c.result.status == "failed":
            raise generation_error(c.result.reason, c.result.code)
        return {
            **_envelope(c),
            "choices": [_choice("".join(texts), finish_reason(c.result))],
            "usage": usage_body(c.result),
        }

    async def stream(self, c: Completion) -> AsyncGenerator[list[SSE], None]:
        """``text_completion`` chunks, one per text delta, the finish, usage if asked, [DONE]."""
        env = _envelope(c)
        async for event in self.run(c):
            if isinstance(event, TextDelta) and event.text:
                yield [SSE(json.dumps({**env, "choices": [_choice(event.text, None)]}))]
            elif isinstance(event, Finished):
                if event.status == "failed":
                    yield stream_error(generation_error(event.reason, event.code))
                    return
                yield [SSE(json.dumps({**env, "choices": [_choice("", finish_reason(c.result))]}))]
        options = c.request.stream_options
        if options is not None and options.include_usage:
            yield [SSE(json.dumps({**env, "choices": [], "usage": usage_body(c.result)}))]
        yield [SSE("[DONE]")]


def check_served(req: CompletionRequest) -> None:
    """400 ``unsupported_parameter`` for ``n``, ``echo``, ``logprobs``, ``best_of`` past
    their one served value, and for a batch of more than one prompt."""
    for name, served in SERVED_ONLY.items():
        value = getattr(req, name)
        if value is not None and value != served:
            raise UnsupportedParameter(
                f"{name}={json.dumps(value)} is not supported (only {json.dumps(served)})",
                param=name,
            )
    batch = isinstance(req.prompt, list) and req.prompt and isinstance(req.prompt[0], str | list)
    if batch and len(req.prompt) > 1:
        raise UnsupportedParameter("only one prompt is served per request", param="prompt")


def prompt_tokens(engine: Engine, req: CompletionRequest) -> list[int]:
    """The prompt's token ids (a FIM prompt with ``suffix``), checked against the vocabulary."""
    prompt: Any = req.prompt
    if isinstance(prompt, list) and prompt and isinstance(prompt[0], str | list):
        prompt = prompt[0]  # a batch of one
    if isinstance(prompt, list):
        n_vocab = engine.info.n_vocab
        bad = next((t for t in prompt if n_vocab and t >= n_vocab), None)
        if bad is not None:
            raise InvalidRequest(
                f"prompt: token {bad} is outside the vocabulary (0..{n_vocab - 1})", param="prompt"
            )
    if req.suffix is not None:
        fim = fim_tokens(engine)
        if fim is None:
            raise UnsupportedParameter(
                f"suffix: {req.model} has no fill-in-the-middle tokens", param="suffix"
            )
        prefix = list(prompt) if isinstance(prompt, list) else text_tokens(engine, prompt)
        return fim_prompt(engine, fim, prefix, text_tokens(engine, req.suffix))
    tokens = list(prompt) if isinstance(prompt, list) else engine.tokenize(prompt)
    if not tokens:
        raise InvalidRequest("prompt: the prompt is empty", param="prompt")
    return tokens


def _stops(req: CompletionRequest) -> tuple[str, ...]:
    return (req.stop,) if isinstance(req.stop, str) else tuple(req.stop or ())


def _check_logit_bias(req: CompletionRequest, n_vocab: int) -> None:
    for token in req.logit_bias or {}:
        if n_vocab and token >= n_vocab:
            raise InvalidRequest(
                f"logit_bias: token {token} is outside the vocabulary (0..{n_vocab - 1})",
                param="logit_bias",
            )


def _refuse(err: EngineError) -> NoReturn:
    """The client error of a generation the engine refused before it began."""
    if isinstance(err, EngineUnavailableError):
        raise EngineUnavailable(str(err), code=err.code) from err
    if isinstance(err, ContextOverflowError):
        raise ContextLengthExceeded(str(err), param="prompt") from err
    raise err


def _choice(text: str, finish: str | None) -> dict[str, Any]:
    return {"text": text, "index": 0, "logprobs": None, "finish_reason": finish}


def _envelope(c: Completion) -> dict[str, Any]:
    return {
        "id": c.id,
        "object": "text_completion",
        "created": c.created,
        "model": c.request.model,
        "system_fingerprint": None,
    }

"""llama-server's ``/completion`` dialect: a generation's request body, its chunks as events.

Pure translation, kept apart from the HTTP engine (``llama_server``): what superfluid's
``GenerateRequest`` becomes on the wire, and how the streamed chunks become
``PromptEvaluated``, ``TokenGenerated`` and ``GenerationFinished``. Field names and
meanings are those of the vendored ``tools/server`` (``server-schema.cpp`` for the
request, ``server-task.cpp`` for the chunks).
"""

from __future__ import annotations

from typing import Any, Protocol

from jupyter_superfluid.engine.base import (
    EngineEvent,
    GenerateRequest,
    GenerationFinished,
    PromptEvaluated,
    SamplingParams,
    TokenGenerated,
)

PING_INTERVAL_S = 10  # llama-server comments a silent stream this often
_RANDOM_SEED = 0xFFFFFFFF  # llama.cpp's LLAMA_DEFAULT_SEED: a random seed per request
_STOP_REASONS = {"eos": "stop", "word": "stop", "limit": "length"}


class TextLookups(Protocol):
    """What the relay asks the remote while a generation streams."""

    url: str

    async def retokenize(self, text: str) -> list[int]:
        """Token ids of generated ``text``."""
        ...

    async def special_text(self, token: int) -> str:
        """The text of a control token."""
        ...


def completion_body(request: GenerateRequest) -> dict[str, Any]:
    """The ``/completion`` request body of ``request`` (a streamed token-id prompt)."""
    return {
        "prompt": list(request.prompt_tokens),
        "stream": True,
        "cache_prompt": True,
        "return_tokens": True,
        "return_progress": True,  # headers and progress while a long prompt is evaluated
        "timings_per_token": True,  # cache_n arrives with the first token
        "sse_ping_interval": PING_INTERVAL_S,
        **sampling_fields(request.sampling),
    }


def sampling_fields(sampling: SamplingParams) -> dict[str, Any]:
    """llama-server's sampling fields for ``sampling``, the local chain's equivalent."""
    fields: dict[str, Any] = {
        "n_predict": -1 if sampling.max_tokens is None else sampling.max_tokens,
        "temperature": sampling.temperature,  # <= 0: greedy
        "top_p": sampling.top_p,
        "min_keep": 1,
        "samplers": ["top_p", "temperature"],
        "mirostat": 0,
        "dynatemp_range": 0.0,
        "seed": remote_seed(sampling.seed),
        "n_probs": 0,
    }
    if sampling.grammar is not None:
        fields["grammar"] = sampling.grammar
    if sampling.logit_bias:
        # false bans a token (as -100 does through the OpenAI APIs); a number biases it.
        fields["logit_bias"] = [
            [int(token), False if bias <= -100 else float(bias)]
            for token, bias in sampling.logit_bias.items()
        ]
    return fields


def remote_seed(seed: int | None) -> int:
    """The 32-bit seed llama.cpp takes; a given seed never maps to "random"."""
    if seed is None:
        return _RANDOM_SEED
    value = seed % 2**32
    return value - 1 if value == _RANDOM_SEED else value


class CompletionRelay:
    """Turns one generation's ``/completion`` chunks into engine events."""

    def __init__(self, engine: TextLookups, n_prompt: int, *, open_on_progress: bool) -> None:
        self.engine = engine
        self.n_prompt = n_prompt
        self.open_on_progress = open_on_progress
        self.started = False  # PromptEvaluated sent
        self.predicted = 0  # tokens the remote generated so far
        self.cached = 0

    async def events(self, chunk: dict[str, Any]) -> list[EngineEvent]:
        """The events of one chunk (a progress report: PromptEvaluated if the first)."""
        if "error" in chunk:
            error = chunk["error"] if isinstance(chunk["error"], dict) else {}
            unavailable = error.get("type") == "unavailable_error" or error.get("code") == 503
            message = f"llama-server at {self.engine.url}: {error.get('message', chunk['error'])}"
            return [self.failed(message, code="engine_unavailable" if unavailable else None)]
        timings = chunk.get("timings") or {}
        progress = chunk.get("prompt_progress") or {}
        self.cached = int(timings.get("cache_n", progress.get("cache", self.cached)))
        # A progress report carries a placeholder token (id 0) that was never generated.
        tokens = [] if progress else [int(t) for t in chunk.get("tokens") or ()]
        out: list[EngineEvent] = []
        # llama-server's first progress report comes as it starts on the prompt, with the
        # count its cache serves; its first token comes once the rest is evaluated.
        opens = bool(tokens or chunk.get("stop") or (progress and self.open_on_progress))
        if opens and not self.started:
            self.started = True
            out.append(PromptEvaluated(self.n_prompt, self.cached))
        if tokens:
            out += await self._tokens(tokens, str(chunk.get("content", "")), chunk)
        if chunk.get("stop"):
            self.predicted = int(chunk.get("tokens_predicted", self.predicted))
            reason = _STOP_REASONS.get(str(chunk.get("stop_type")), "stop")
            out.append(GenerationFinished(reason, self.predicted))  # type: ignore[arg-type]
        return out

    async def _tokens(
        self, tokens: list[int], text: str, chunk: dict[str, Any]
    ) -> list[TokenGenerated]:
        """The generated tokens of a chunk, with the ids of held-back ones recovered."""
        predicted = int(chunk.get("tokens_predicted", self.predicted + len(tokens)))
        held_back = predicted - self.predicted - len(tokens)
        self.predicted = predicted
        if held_back > 0:
            # Their ids were never sent: tokenize the text they completed.
            tokens = await self.engine.retokenize(text) or tokens
        elif not text and len(tokens) == 1:
            text = await self.engine.special_text(tokens[0])
        return [TokenGenerated(t, "") for t in tokens[:-1]] + [TokenGenerated(tokens[-1], text)]

    def failed(self, message: str, *, code: str | None) -> GenerationFinished:
        """The last event of a generation that failed."""
        return GenerationFinished("error", self.predicted, error=message, code=code)

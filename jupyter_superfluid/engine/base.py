"""The engine seam: protocol-neutral types and the async Engine interface.

Nothing here knows about HTTP, Jupyter or any wire protocol. Only plain,
serializable values cross this seam, so the engine can later move into its own
process (or be replaced by another serving engine) without touching the layers
above it.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

FinishReason = Literal["stop", "length", "cancelled", "error"]


class EngineError(Exception):
    """A failure inside the engine (model load, decode, sampling)."""


class MediaError(EngineError):
    """Media that cannot be used: undecodable bytes, an unsupported kind, a count mismatch."""

    def __init__(self, message: str, *, index: int | None = None) -> None:
        super().__init__(message)
        self.index = index  # which medium of the prompt, when one is to blame


# Where a medium goes in a prompt text given to ``tokenize_media``.
MEDIA_MARKER = "<__media__>"


def media_placeholder_id(digest: str) -> int:
    """The negative id standing for every position of a medium (sha256 hex) in cache keys."""
    return -(int(digest[:8], 16) % 2**30) - 1


@dataclass(frozen=True)
class MediaRef:
    """One encoded medium as the layers above see it: its embeddings stay in the engine.

    ``key`` names the engine's copy of the embeddings (a medium may take several
    pieces, e.g. one per 30 s of audio); ``digest`` is the sha256 of the media bytes.
    """

    key: str
    kind: str  # "image" or "audio"
    n_pos: int  # prompt positions it occupies
    digest: str

    @property
    def placeholder_id(self) -> int:
        """The id each of its positions has in ``prompt_tokens``."""
        return media_placeholder_id(self.digest)


@dataclass(frozen=True)
class MediaTokens:
    """A tokenized multimodal prompt: token ids (media as placeholder runs) and its media."""

    tokens: tuple[int, ...]
    media: tuple[MediaRef, ...]


class EngineUnavailableError(EngineError):
    """The engine cannot serve now: its process is restarting, or a remote engine is down.

    ``code`` is the machine code the layers above answer with (``engine_unavailable``,
    or ``engine_crashed`` for a generation its process took down).
    """

    def __init__(self, message: str, *, code: str = "engine_unavailable") -> None:
        super().__init__(message)
        self.code = code


class ModelLoadError(EngineError):
    """A model file that cannot be loaded; the message names the file and the cause."""


class ContextOverflowError(EngineError):
    """A prompt (plus its output budget) that does not fit the context window."""

    def __init__(self, message: str, *, prompt_tokens: int, context_size: int) -> None:
        super().__init__(message)
        self.prompt_tokens = prompt_tokens
        self.context_size = context_size


@dataclass(frozen=True)
class SamplingParams:
    """How to pick each next token."""

    temperature: float = 0.8
    top_p: float = 0.95
    seed: int | None = None
    max_tokens: int | None = None  # None: fill the remaining context
    grammar: str | None = None  # GBNF, rule "root"
    logit_bias: Mapping[int, float] | None = None  # token id → bias; -100 bans a token


@dataclass(frozen=True)
class GenerateRequest:
    """One tokenized generation: a prompt's token ids and how to sample after it."""

    prompt_tokens: tuple[int, ...]
    sampling: SamplingParams = field(default_factory=SamplingParams)
    # Tokens a conversation's template puts after a turn that ends normally (e.g. the
    # newline after <|im_end|>): fed into the KV cache after the generation, so its
    # continuation is served wholly from cache.
    cache_suffix: tuple[int, ...] = ()
    # The media of a prompt from ``tokenize_media``, in order; ``prompt_tokens``
    # then holds each one's placeholder ids.
    media: tuple[MediaRef, ...] = ()
    # The turn can be continued (a stored response will point at it): the engine keeps
    # its KV state when it moves out of the running cache (host memory, disk). One-off
    # turns (chat completions, ``store: false``) leave only prefixes that recur.
    retain: bool = False
    # Whose prefix cache this prompt may share: requests with different salts never
    # reuse each other's cached blocks (a per-principal keyed hash; None: no isolation).
    # Engines that can isolate (vLLM) send it; the local engine and llama-server ignore it.
    cache_salt: str | None = None


@dataclass(frozen=True)
class PromptEvaluated:
    """First event of a generation: how the prompt was served."""

    prompt_tokens: int
    cached_tokens: int  # tokens served from the KV cache, not re-evaluated


@dataclass(frozen=True)
class TokenGenerated:
    """One generated token and the text it completed (may be empty mid UTF-8)."""

    token_id: int
    text: str


@dataclass(frozen=True)
class GenerationFinished:
    """Last event of a generation."""

    reason: FinishReason
    completion_tokens: int
    error: str | None = None
    # With reason "error": a machine code when the engine itself failed (e.g.
    # "engine_crashed", "engine_unavailable"); None for a failure of this one request.
    code: str | None = None
    # An engine that knows the cached-token count only at the end (vLLM reports it in
    # its last, usage chunk) gives it here; it replaces PromptEvaluated's count.
    cached_tokens: int | None = None


EngineEvent = PromptEvaluated | TokenGenerated | GenerationFinished


@dataclass(frozen=True)
class ModelInfo:
    """What the layers above need to know about a loaded model."""

    id: str
    path: str
    context_size: int
    chat_template: str | None
    bos_token: str
    eos_token: str
    eog_token_ids: tuple[int, ...]
    accepts_images: bool = False
    accepts_audio: bool = False
    n_vocab: int = 0
    # Fill-in-the-middle: the (prefix, suffix, middle) token ids, None when it has none.
    fim_tokens: tuple[int, int, int] | None = None


@runtime_checkable
class Engine(Protocol):
    """A loaded model that tokenizes and generates, off the event loop."""

    @property
    def info(self) -> ModelInfo:
        """The model's metadata."""
        ...

    def tokenize(self, text: str, *, special: bool = True) -> list[int]:
        """Token ids of ``text``; ``special`` parses control tokens like <|im_end|>."""
        ...

    def detokenize(self, tokens: list[int]) -> str:
        """Text of ``tokens``, control tokens rendered."""
        ...

    def tokenize_media(self, text: str, media: Sequence[bytes]) -> MediaTokens:
        """Tokens and media of ``text`` with one MEDIA_MARKER per medium (blocking).

        Raises MediaError when the model takes no media of that kind or the bytes
        cannot be decoded.
        """
        ...

    def generate(self, request: GenerateRequest) -> AsyncGenerator[EngineEvent, None]:
        """Stream PromptEvaluated, then TokenGenerated*, then GenerationFinished.

        Closing the iterator early (``aclose``, or the consuming task being
        cancelled) cancels the generation before its next token.
        """
        ...

    async def close(self) -> None:
        """Stop the worker and free the model."""
        ...

"""Request shape of ``POST /v1/completions`` (OpenAI's legacy completions): a typed wire model.

As the other OpenAI models: strict types, unknown fields accepted and ignored, a
wrong type a 400 naming the field. ``n``, ``echo``, ``logprobs`` and ``best_of``
are typed here and refused past their one served value by the service
(``unsupported_parameter``).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from jupyter_superfluid.generation.wire import Wire
from jupyter_superfluid.openai_api.protocol import (
    LogitBias,
    Penalty,
    Seed,
    Temperature,
    Text,
    TokenCount,
    TopP,
)

TokenId = Annotated[int, Field(ge=0, le=2**31 - 1)]
TokenIds = Annotated[list[TokenId], Field(min_length=1, max_length=1 << 20)]
# One prompt: text or token ids; a list of prompts (a batch) must hold exactly one.
Prompt = Text | TokenIds | Annotated[list[Text], Field(min_length=1)] | list[TokenIds]


class StreamOptions(Wire):
    """``{"include_usage"?}``: a last chunk with the usage."""

    include_usage: bool | None = None


class CompletionRequest(Wire):
    """``POST /v1/completions``."""

    model: str = Field(min_length=1, max_length=512)
    prompt: Prompt
    suffix: Text | None = None
    max_tokens: TokenCount | None = None
    temperature: Temperature | None = None
    top_p: TopP | None = None
    seed: Seed | None = None
    stop: str | Annotated[list[str], Field(max_length=4)] | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    n: int | None = None
    echo: bool | None = None
    logprobs: int | None = None
    best_of: int | None = None
    logit_bias: LogitBias | None = None
    presence_penalty: Penalty | None = None
    frequency_penalty: Penalty | None = None
    user: str | None = Field(default=None, max_length=512)

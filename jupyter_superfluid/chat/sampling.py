"""From a neutral request to the engine's sampling: defaults, token budget, grammar."""

from __future__ import annotations

from jupyter_superfluid.chat.codec import ChatCodec
from jupyter_superfluid.chat.types import ChatRequest, ChatSampling, ToolSpec
from jupyter_superfluid.engine.base import SamplingParams
from jupyter_superfluid.errors import InvalidRequest

DEFAULT_TEMPERATURE = 0.8
DEFAULT_TOP_P = 0.95


def grammar_for(
    request: ChatRequest, tools: tuple[ToolSpec, ...], codec: ChatCodec, *, opens_reasoning: bool
) -> str | None:
    """The GBNF that forces a tool call (as the template writes calls) or a JSON format,
    or None for free text."""
    choice = request.tool_choice
    fmt = request.output_format
    try:
        if tools and choice.mode in ("required", "function"):
            only = choice.name if choice.mode == "function" else None
            return codec.call_grammar(tools, only=only, opens_reasoning=opens_reasoning)
        if fmt.type == "json_schema" and fmt.schema is not None:
            return codec.json_grammar(fmt.schema, opens_reasoning=opens_reasoning)
        if fmt.type == "json_object":
            return codec.json_grammar(None, opens_reasoning=opens_reasoning)
    except Exception as err:  # the converter's own errors on schemas it cannot handle
        param = "tools" if tools and choice.mode in ("required", "function") else fmt.param
        raise InvalidRequest(
            f"{param}: the JSON schema cannot be enforced: {err}", param=param
        ) from err
    return None


def sampling_for(
    sampling: ChatSampling, grammar: str | None, default_max_tokens: int, *, room: int
) -> SamplingParams:
    """Engine sampling for a request: its values, else the model's defaults."""
    max_tokens = sampling.max_tokens or default_max_tokens or room
    return SamplingParams(
        temperature=DEFAULT_TEMPERATURE if sampling.temperature is None else sampling.temperature,
        top_p=DEFAULT_TOP_P if sampling.top_p is None else sampling.top_p,
        seed=sampling.seed,
        max_tokens=min(max_tokens, room),
        grammar=grammar,
        logit_bias=dict(sampling.logit_bias) or None,
    )

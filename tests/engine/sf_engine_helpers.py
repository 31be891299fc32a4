"""Helpers shared by the engine tests (a plain module: conftest is not importable)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from jupyter_superfluid.engine.base import (
    Engine,
    EngineEvent,
    GenerateRequest,
    GenerationFinished,
    PromptEvaluated,
    SamplingParams,
    TokenGenerated,
)

# A KV budget puts every slot in one unified cache (two default windows, as the
# default was before each slot had a stream of its own): the layout whose idle
# slots are in the running ones' way, so that tests of moving them out use it.
UNIFIED = 8192


@dataclass
class Generation:
    """The events of one finished generation, taken apart."""

    events: list[EngineEvent]

    @property
    def prompt(self) -> PromptEvaluated:
        first = self.events[0]
        assert isinstance(first, PromptEvaluated)
        return first

    @property
    def tokens(self) -> list[int]:
        return [e.token_id for e in self.events if isinstance(e, TokenGenerated)]

    @property
    def text(self) -> str:
        return "".join(e.text for e in self.events if isinstance(e, TokenGenerated))

    @property
    def finished(self) -> GenerationFinished:
        last = self.events[-1]
        assert isinstance(last, GenerationFinished)
        return last


async def agenerate(
    engine: Engine, prompt: list[int], *, retain: bool = False, **sampling: object
) -> Generation:
    """Run one generation to its end (``retain``: a turn that can be continued)."""
    params = SamplingParams(**sampling)  # type: ignore[arg-type]
    request = GenerateRequest(tuple(prompt), params, retain=retain)
    return Generation([event async for event in engine.generate(request)])


def generate(
    engine: Engine, prompt: list[int], *, retain: bool = False, **sampling: object
) -> Generation:
    """``agenerate`` from synchronous test code."""
    return asyncio.run(agenerate(engine, prompt, retain=retain, **sampling))


def chat_prompt(engine: Engine, user: str) -> list[int]:
    """A ChatML prompt asking ``user``, ready for the assistant's answer."""
    return engine.tokenize(f"<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n")

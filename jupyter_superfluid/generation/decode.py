"""One generation on an engine, as every protocol runs it: engine events → neutral events.

``run_generation`` submits a tokenized ``GenerateRequest``, feeds each generated
token's text through an output parser and the stop strings, fills a ``TurnResult``
(items, generated ids, usage) and ends with ``Finished``. Chat (``ChatService.run``)
parses with its template's parser; legacy completions with ``RawText``.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import dataclass, field
from typing import NoReturn

from jupyter_superfluid.chat.parsers import OutputParser
from jupyter_superfluid.chat.stops import StopFilter
from jupyter_superfluid.chat.types import (
    ChatEvent,
    Finished,
    ItemDone,
    OutputItem,
    PromptProcessed,
    TextDelta,
    Usage,
)
from jupyter_superfluid.engine.base import (
    Engine,
    EngineError,
    GenerateRequest,
    GenerationFinished,
    PromptEvaluated,
    TokenGenerated,
)


@dataclass
class TurnResult:
    """What a finished turn produced, as counted by the engine."""

    status: str = "completed"
    reason: str | None = None
    usage: Usage = field(default_factory=Usage)
    items: list[OutputItem] = field(default_factory=list)
    generated: list[int] = field(default_factory=list)
    # The text of each generated token, joined once when the turn is committed: adding
    # to one string per token copies the whole text each time (quadratic in its length).
    generated_pieces: list[str] = field(default_factory=list)
    reasoning_tokens: int = 0
    code: str | None = None  # failed: the engine's machine code, if the engine failed
    counted: int | None = None  # generated tokens as the engine counts them (a remote may
    # stream a different number of ids: it re-tokenizes what it cannot send)

    @property
    def generated_text(self) -> str:
        """Everything generated, as text."""
        return "".join(self.generated_pieces)


async def run_generation(
    engine: Engine,
    request: GenerateRequest,
    parser: OutputParser,
    stops: StopFilter,
    result: TurnResult,
    refuse: Callable[[EngineError], NoReturn],
) -> AsyncGenerator[ChatEvent, None]:
    """Generate ``request``, yielding neutral events; the last one is ``Finished``.

    ``refuse`` raises the client error of a generation the engine refused before it
    began. Closing this iterator early cancels the generation at the next token.
    """
    prompt_tokens = cached = 0
    reason = "stop"
    try:
        stream = engine.generate(request)
    except EngineError as err:
        refuse(err)
    try:
        async for event in stream:
            if isinstance(event, PromptEvaluated):
                prompt_tokens, cached = event.prompt_tokens, event.cached_tokens
                yield PromptProcessed(prompt_tokens, cached)
            elif isinstance(event, TokenGenerated):
                # A token generated inside the reasoning section (its closing tag
                # included) is a reasoning token: counted as generated, not re-tokenized.
                result.reasoning_tokens += parser.in_reasoning
                result.generated.append(event.token_id)
                result.generated_pieces.append(event.text)
                for out in stops.apply(parser.feed(event.text)):
                    yield _track(result, out)
                if stops.hit:
                    reason = "stop"
                    break
            elif isinstance(event, GenerationFinished):
                reason, result.counted = event.reason, event.completion_tokens
                if event.cached_tokens is not None:  # a remote that counts at the end
                    cached = event.cached_tokens
                if event.reason == "error":
                    result.reason, result.code = event.error, event.code
    except EngineError as err:  # an engine process refuses at the first event, not the call
        if prompt_tokens or result.generated:
            raise
        refuse(err)
    finally:
        await stream.aclose()
    for out in stops.apply(parser.finish(truncated=reason == "length"), final=True):
        yield _track(result, out)
    yield _finish(result, reason, prompt_tokens, cached)


def _track(result: TurnResult, event: ChatEvent) -> ChatEvent:
    if isinstance(event, ItemDone):
        result.items.append(event.item)
    return event


def _finish(result: TurnResult, reason: str, prompt: int, cached: int) -> Finished:
    if reason == "length":
        result.status, result.reason = "incomplete", "max_output_tokens"
    elif reason == "cancelled":
        result.status = "cancelled"
    elif reason == "error":
        result.status = "failed"
    output = len(result.generated) if result.counted is None else result.counted
    result.usage = Usage(
        input_tokens=prompt,
        cached_tokens=cached,
        output_tokens=output,
        reasoning_tokens=min(result.reasoning_tokens, output),
    )
    return Finished(result.status, result.usage, result.reason, result.code)  # type: ignore[arg-type]


class RawText:
    """The output parser of raw text: one message item, the end-of-generation text dropped."""

    def __init__(self, end_tokens: Sequence[str]) -> None:
        self._ends = frozenset(e for e in end_tokens if e)
        self._text: list[str] = []
        self._items: list[OutputItem] = []

    @property
    def items(self) -> list[OutputItem]:
        """The finished item (after ``finish``)."""
        return self._items

    @property
    def in_reasoning(self) -> bool:
        """Raw text has no reasoning section."""
        return False

    def feed(self, text: str) -> list[ChatEvent]:
        """The text of one token as a message delta (an end-of-generation token's: none)."""
        if not text or text in self._ends:
            return []
        self._text.append(text)
        return [TextDelta(0, "message", text)]

    def finish(self, truncated: bool = False) -> list[ChatEvent]:
        """The one message item."""
        item = OutputItem(kind="message", text="".join(self._text), complete=not truncated)
        self._items = [item]
        return [ItemDone(0, item)]

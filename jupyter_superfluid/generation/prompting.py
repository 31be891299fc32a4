"""Turning a conversation into prompt tokens: fresh, rebuilt, or forked warm.

A *fork* continues a stored session: its exact tokens are kept and only the
new messages are rendered and appended, so the engine serves the stored part
from its prefix cache. That is correct only when the spec's conditions hold
(same model, a codec that renders each message on its own, a previous turn that
ended normally, the same head). Otherwise the whole conversation is rendered
afresh ("rebuilt") and the prefix cache still serves whatever matches.

A template that renders earlier turns anew (Qwen3's drops their reasoning) cannot be
forked, but what its prompt held before the generation prompt is still the start of
the next prompt's text. Such a prompt records where that is (``PromptSplit``: the
characters, the tokens, a digest of the text); the next turn *extends* it: when its
text starts with the same characters, the stored tokens up to there are kept and only
the rest (the reply as rendered again, the new messages) is tokenized.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from jupyter_superfluid.chat.codec import ChatCodec
from jupyter_superfluid.chat.environment import TemplateRefusal
from jupyter_superfluid.chat.syntax import markers
from jupyter_superfluid.chat.types import ChatMessage, ToolSpec
from jupyter_superfluid.engine.base import MediaRef
from jupyter_superfluid.generation.media import describe, gather
from jupyter_superfluid.generation.prompt_tokens import PromptTokens

_PROBE = "\u2063superfluid-probe\u2063"


@dataclass(frozen=True)
class Continuation:
    """A stored conversation this request continues."""

    messages: tuple[ChatMessage, ...]  # earlier turns, instructions excluded
    session_id: str | None = None  # the stored session to fork from
    end: int = 0  # its events that belong to the stored response
    meta: dict[str, Any] = field(default_factory=dict)  # the stored session's meta
    completed: bool = True  # the stored turn ended normally


ContinuationReader = Callable[[], Continuation]
"""A stored continuation still to be read: called on the render's worker thread, so that
reading it from the store and rendering the turn take one hop off the event loop."""


@dataclass
class PromptEvent:
    """One logged session event: what it came from and the tokens it rendered to."""

    kind: str  # "head", "input", "prompt" or "output"
    item: dict[str, Any] | None
    tokens: list[int]


@dataclass
class Prompt:
    """The rendered prompt of one turn and how it is logged."""

    text: str  # the whole prompt as text (for checking closings)
    tokens: list[int]
    events: list[PromptEvent]  # new events this turn logs before its output
    messages: tuple[ChatMessage, ...]  # the whole conversation, as rendered
    parent: tuple[str, int] | None  # (session id, events) forked from
    forkable: bool  # its turns render per message, so it can be forked later
    gen_prompt: list[int] = field(default_factory=list)  # logged with the output event
    media: tuple[MediaRef, ...] = ()  # the engine's media; ``tokens`` holds placeholders
    split: PromptSplit | None = None  # where the next turn's text may take over


@dataclass(frozen=True)
class PromptSplit:
    """The start of a prompt that the next turn's prompt begins with: the text before
    the generation prompt (its length and digest) and its token count."""

    chars: int
    tokens: int
    digest: str

    def to_meta(self) -> list[Any]:
        """As a session's meta keeps it."""
        return [self.chars, self.tokens, self.digest]

    @classmethod
    def from_meta(cls, value: Any) -> PromptSplit | None:
        """From a session's meta (None if it holds none, or an unreadable one)."""
        if not (isinstance(value, list) and len(value) == 3):
            return None
        chars, tokens, digest = value
        if not (isinstance(chars, int) and isinstance(tokens, int) and isinstance(digest, str)):
            return None
        return cls(chars, tokens, digest)


def head_key(instructions: str | None, tools: tuple[ToolSpec, ...], kwargs: dict) -> str:
    """A digest of what leads a conversation: instructions, callable tools, template args."""
    doc = {
        "instructions": instructions or "",
        "tools": [[t.qualified_name, t.description, t.parameters] for t in tools],
        "kwargs": kwargs,
    }
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()


def message_item(message: ChatMessage) -> dict[str, Any]:
    """A message as the JSON a session event records."""
    item: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.reasoning:
        item["reasoning"] = message.reasoning
    if message.tool_calls:
        item["tool_calls"] = [
            {
                "call_id": c.call_id,
                "name": c.name,
                "arguments": c.arguments,
                "namespace": c.namespace,
            }
            for c in message.tool_calls
        ]
    if message.tool_call_id:
        item["tool_call_id"] = message.tool_call_id
    if message.media:
        item["media"] = describe(message.media)
    return item


class PromptBuilder:
    """Renders a turn with one model's codec and tokenizer."""

    def __init__(self, codec: ChatCodec, tokens: PromptTokens, tokenize_media: Any = None) -> None:
        self.codec = codec
        self.tokens = tokens  # pieces without the BOS; a prompt's first with it (blocking)
        # (text, media) → (placeholder token ids, media references); blocking
        self.tokenize_media = tokenize_media

    def render(
        self,
        messages: tuple[ChatMessage, ...],
        tools: tuple[ToolSpec, ...],
        kwargs: dict,
        *,
        generation: bool,
    ) -> str:
        """The template's text for ``messages``."""
        return self.codec.render(
            list(messages), tools=tools, add_generation_prompt=generation, template_kwargs=kwargs
        )

    def fresh(
        self,
        head: tuple[ChatMessage, ...],
        rest: tuple[ChatMessage, ...],
        tools: tuple[ToolSpec, ...],
        kwargs: dict,
    ) -> Prompt:
        """Render a whole conversation; log it message by message when the codec allows."""
        messages = head + rest
        text = self.render(messages, tools, kwargs, generation=True)
        if not self.codec.renders_per_message:
            tokens = self.tokens.prompt(text)
            split = self._split(text, tokens, tools, kwargs)
            return _unforkable(text, tokens, messages, split=split)
        events: list[PromptEvent] = []
        done = ""
        for i in range(len(messages)):
            upto = self.render(messages[: i + 1], tools, kwargs, generation=False)
            kind = "head" if i == 0 and head else "input"
            piece = self.tokens.piece(upto[len(done) :])
            first = self.tokens.start(piece) if i == 0 else piece
            events.append(PromptEvent(kind, message_item(messages[i]), first))
            done = upto
        if not text.startswith(done):
            return _unforkable(text, self.tokens.prompt(text), messages)
        tokens = [t for e in events for t in e.tokens]
        gen_prompt = self.tokens.constant(text[len(done) :])  # the generation prompt
        # The generation prompt is logged as the start of the output event.
        return Prompt(
            text, tokens + gen_prompt, events, messages, None, forkable=True, gen_prompt=gen_prompt
        )

    def extend(
        self,
        split: PromptSplit,
        stored_tokens: list[int],
        messages: tuple[ChatMessage, ...],
        tools: tuple[ToolSpec, ...],
        kwargs: dict,
    ) -> Prompt | None:
        """The whole conversation ``messages``, rendered, with the stored prompt's tokens
        kept up to its ``split``; None when this text does not begin with that text."""
        text = self.render(messages, tools, kwargs, generation=True)
        if len(stored_tokens) < split.tokens or _digest(text[: split.chars]) != split.digest:
            return None
        tokens = stored_tokens[: split.tokens] + self.tokens.piece(text[split.chars :])
        following = self._split(text, tokens, tools, kwargs)  # where the next turn takes over
        return _unforkable(text, tokens, messages, split=following)

    def _split(
        self, text: str, tokens: list[int], tools: tuple[ToolSpec, ...], kwargs: dict
    ) -> PromptSplit | None:
        """Where the generation prompt begins in ``text`` and ``tokens``, if it begins with
        a control token (the tokenizer cuts there: the ids before it are the same whatever
        follows); None otherwise."""
        opening = self.codec.generation_opening(tools, kwargs)
        if not opening or not text.endswith(opening):
            return None
        marker = markers.SPECIAL_TOKEN.match(opening)
        if marker is None or len(self.tokens.constant(marker.group(0))) != 1:
            return None
        tail = self.tokens.constant(opening)
        if len(tail) >= len(tokens) or tokens[len(tokens) - len(tail) :] != tail:
            return None
        kept = text[: len(text) - len(opening)]
        return PromptSplit(len(kept), len(tokens) - len(tail), _digest(kept))

    def with_media(
        self,
        head: tuple[ChatMessage, ...],
        rest: tuple[ChatMessage, ...],
        tools: tuple[ToolSpec, ...],
        kwargs: dict,
    ) -> Prompt:
        """Render a conversation holding images or audio and tokenize it with its media.

        Always rebuilt, never forked: placeholder ids cannot be evaluated without
        their media (the engine's prefix cache still serves what matches).
        """
        messages = head + rest
        text = self.render(messages, tools, kwargs, generation=True)
        tokens, media = self.tokenize_media(text, gather(messages))
        return _unforkable(text, list(tokens), messages, media)

    def fork(
        self,
        cont: Continuation,
        stored_tokens: list[int],
        head: tuple[ChatMessage, ...],
        new: tuple[ChatMessage, ...],
        tools: tuple[ToolSpec, ...],
        kwargs: dict,
    ) -> Prompt | None:
        """Append only ``new`` to a stored session's exact tokens; None if it cannot be done."""
        before = head + cont.messages
        messages = before + new
        stored_text = self.render(before, tools, kwargs, generation=False)
        text = self.render(messages, tools, kwargs, generation=True)
        if not text.startswith(stored_text):
            return None
        events: list[PromptEvent] = []
        done = stored_text
        for i in range(len(before), len(messages)):
            upto = self.render(messages[: i + 1], tools, kwargs, generation=False)
            if not upto.startswith(done):
                return None
            piece = self.tokens.piece(upto[len(done) :])
            events.append(PromptEvent("input", message_item(messages[i]), piece))
            done = upto
        if not text.startswith(done):
            return None
        new_tokens = [t for e in events for t in e.tokens]
        gen_prompt = self.tokens.constant(text[len(done) :])  # the generation prompt
        parent = (cont.session_id, cont.end) if cont.session_id else None
        return Prompt(
            text,
            stored_tokens + new_tokens + gen_prompt,
            events,
            messages,
            parent,
            forkable=True,
            gen_prompt=gen_prompt,
        )

    def expected_closing(
        self, prompt: Prompt, tools: tuple[ToolSpec, ...], kwargs: dict
    ) -> list[int]:
        """What the template puts after a reply's end-of-turn token (found by rendering a
        probe reply), so the engine caches it with the reply before anyone continues."""
        eos = self.codec.eos_token
        per_message = prompt.forkable or bool(prompt.media and self.codec.renders_per_message)
        if not per_message or not eos:
            return []
        probe = ChatMessage("assistant", _PROBE)
        try:
            full = self.render((*prompt.messages, probe), tools, kwargs, generation=False)
        except TemplateRefusal:
            return []
        tail = full[full.find(_PROBE) + len(_PROBE) :] if _PROBE in full else ""
        return self.tokens.constant(tail[len(eos) :]) if tail.startswith(eos) else []

    def closing(
        self,
        prompt: Prompt,
        generated_text: str,
        assistant: ChatMessage,
        tools: tuple[ToolSpec, ...],
        kwargs: dict,
    ) -> list[int] | None:
        """Tokens the template puts after the generated text (e.g. a newline after
        the end-of-turn token), so the stored session equals the canonical
        rendering; None when the generated text is not that rendering's prefix."""
        if not prompt.forkable:
            return None
        try:
            full = self.render((*prompt.messages, assistant), tools, kwargs, generation=False)
        except TemplateRefusal:  # the reply is one the template will not render back
            return None
        spoken = prompt.text + generated_text
        if not full.startswith(spoken):
            return None
        return self.tokens.constant(full[len(spoken) :])  # what the template writes after


def _unforkable(
    text: str,
    tokens: list[int],
    messages: tuple[ChatMessage, ...],
    media: tuple[MediaRef, ...] = (),
    split: PromptSplit | None = None,
) -> Prompt:
    """A prompt logged as one head event holding every message (it cannot be forked)."""
    event = PromptEvent("head", {"messages": [message_item(m) for m in messages]}, tokens)
    return Prompt(text, tokens, [event], messages, None, False, media=media, split=split)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:32]

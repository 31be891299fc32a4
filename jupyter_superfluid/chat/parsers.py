"""Incremental output parsers: streamed model text in, neutral output-item events out.

A parser is fed text deltas as the model produces them (special tokens included as their
text) and turns them into ``ItemStarted`` / ``TextDelta`` / ``ItemDone`` events for
reasoning, message text and function calls. It holds back only the few characters that
may be the start of a tag, so text streams at token cadence. Each template family has its
parser, chosen through a small registry by what the template renders (never by name).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, Protocol

from jupyter_superfluid.chat.codec import ChatCodec
from jupyter_superfluid.chat.types import (
    ChatEvent,
    ChatMessage,
    ItemDone,
    ItemKind,
    ItemStarted,
    OutputItem,
    TextDelta,
    ToolCall,
    ToolSpec,
)

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
CALL_OPEN, CALL_CLOSE = "<tool_call>", "</tool_call>"
END_OF_TURN = ("<|im_end|>", "<|endoftext|>")

CallIds = Callable[[int], str]


def random_call_id(index: int) -> str:
    """A fresh ``call_…`` id (the output index is unused)."""
    return f"call_{uuid.uuid4().hex[:24]}"


class OutputParser(Protocol):
    """Streamed model text in, neutral events out."""

    def feed(self, text: str) -> list[ChatEvent]:
        """Take the next text delta; return the events it completes."""
        ...

    def finish(self, truncated: bool = False) -> list[ChatEvent]:
        """End of output (``truncated``: cut by the token cap); close open items."""
        ...

    @property
    def items(self) -> list[OutputItem]:
        """The items finished so far, in output order."""
        ...

    @property
    def in_reasoning(self) -> bool:
        """Whether the output is inside a reasoning section now."""
        ...


class _Mode(Enum):
    TEXT = "text"  # message text, or between items
    REASONING = "reasoning"
    CALL = "call"  # inside <tool_call>…</tool_call>
    DONE = "done"  # after an end-of-turn token


@dataclass(frozen=True)
class TagSet:
    """The markup a family's output uses; empty strings switch a feature off."""

    think_open: str = ""
    think_close: str = ""
    call_open: str = ""
    call_close: str = ""


HERMES_TAGS = TagSet(THINK_OPEN, THINK_CLOSE, CALL_OPEN, CALL_CLOSE)
PLAIN_TAGS = TagSet()


@dataclass
class _Open:
    index: int
    kind: ItemKind
    text: str = ""


class TaggedOutputParser:
    """Parses text with ``<think>`` reasoning and ``<tool_call>`` JSON calls (Qwen/Hermes)."""

    def __init__(
        self,
        tags: TagSet = HERMES_TAGS,
        *,
        tools: Sequence[ToolSpec] = (),
        end_tokens: Sequence[str] = END_OF_TURN,
        opens_reasoning: bool = False,
        call_ids: CallIds = random_call_id,
    ) -> None:
        self._tags = tags
        self._tools = {t.qualified_name: t for t in tools}
        self._ends = tuple(e for e in end_tokens if e)
        self._call_ids = call_ids
        self._mode = _Mode.REASONING if opens_reasoning and tags.think_close else _Mode.TEXT
        self._buf = ""  # text not yet handled: a possible tag start, or a call's body
        self._newlines = ""  # trailing newlines held back: they may be template layout
        # Only templates with tags put layout newlines around them; plain text is verbatim,
        # so a reply re-renders exactly as generated (and its session can fork warm).
        self._layout = bool(tags.think_open or tags.call_open)
        self._call_body = ""
        self._open: _Open | None = None
        self._next_index = 0
        self._items: list[OutputItem] = []

    @property
    def items(self) -> list[OutputItem]:
        """The items finished so far, in output order."""
        return list(self._items)

    @property
    def in_reasoning(self) -> bool:
        """Whether the text fed so far leaves the output inside a reasoning section."""
        return self._mode is _Mode.REASONING

    def feed(self, text: str) -> list[ChatEvent]:
        """Take the next text delta; return the events it completes."""
        events: list[ChatEvent] = []
        self._buf += text
        self._drain(events, final=False)
        return events

    def finish(self, truncated: bool = False) -> list[ChatEvent]:
        """End of output (``truncated``: cut by the token cap); close open items."""
        events: list[ChatEvent] = []
        self._drain(events, final=True)
        if self._mode is _Mode.CALL:
            self._end_call(events, truncated=truncated)
        self._close(events, complete=not truncated)
        self._mode = _Mode.DONE
        return events

    # -- scanning -------------------------------------------------------------------

    def _watched(self) -> tuple[str, ...]:
        t = self._tags
        by_mode = {
            _Mode.TEXT: (t.think_open, t.call_open),
            _Mode.REASONING: (t.think_close,),
            _Mode.CALL: (t.call_close,),
        }
        return tuple(tag for tag in (*by_mode.get(self._mode, ()), *self._ends) if tag)

    def _drain(self, events: list[ChatEvent], *, final: bool) -> None:
        while self._mode is not _Mode.DONE and self._buf:
            tags = self._watched()
            hit = min(
                ((self._buf.find(tag), -len(tag), tag) for tag in tags if tag in self._buf),
                default=None,
            )
            if hit is None:
                keep = 0 if final else _partial_tag_length(self._buf, tags)
                self._consume(self._buf[: len(self._buf) - keep], events)
                self._buf = self._buf[len(self._buf) - keep :]
                return
            at, _, tag = hit
            self._consume(self._buf[:at], events)
            self._buf = self._buf[at + len(tag) :]
            self._on_tag(tag, events)
        if self._mode is _Mode.DONE:
            self._buf = ""  # nothing after the end of the turn belongs to the reply

    def _consume(self, text: str, events: list[ChatEvent]) -> None:
        if not text:
            return
        if self._mode is _Mode.CALL:
            self._call_text(text)
        else:
            kind: ItemKind = "reasoning" if self._mode is _Mode.REASONING else "message"
            self._emit_text(kind, text, events)

    def _on_tag(self, tag: str, events: list[ChatEvent]) -> None:
        t = self._tags
        if tag in self._ends:
            if self._mode is _Mode.CALL:
                self._end_call(events, truncated=False)
            self._close(events, complete=True)
            self._mode = _Mode.DONE
        elif tag == t.think_open:
            self._close(events, complete=True)
            self._mode = _Mode.REASONING
        elif tag == t.think_close:
            self._close(events, complete=True)
            self._mode = _Mode.TEXT
        elif tag == t.call_open:
            self._close(events, complete=True)
            self._mode = _Mode.CALL
        elif tag == t.call_close:
            self._end_call(events, truncated=False, closed=True)

    # -- reasoning and message text -------------------------------------------------

    def _emit_text(self, kind: ItemKind, text: str, events: list[ChatEvent]) -> None:
        if not self._layout:
            if text:
                if self._open is None:
                    self._start(events, kind)
                assert self._open is not None
                self._open.text += text
                events.append(TextDelta(self._open.index, kind, text))
            return
        text = self._newlines + text
        if self._open is None:
            # The template puts newlines after <think>, </think> and between calls.
            text = text.lstrip("\n")
        body = text.rstrip("\n")
        self._newlines = text[len(body) :]
        if not body:
            return
        if self._open is None:
            self._start(events, kind)
        assert self._open is not None
        self._open.text += body
        events.append(TextDelta(self._open.index, kind, body))

    def _start(self, events: list[ChatEvent], kind: ItemKind, **fields: Any) -> None:
        self._open = _Open(self._next_index, kind)
        self._next_index += 1
        events.append(ItemStarted(self._open.index, kind, **fields))

    def _close(self, events: list[ChatEvent], *, complete: bool) -> None:
        # Newlines before a tag or the end are the template's layout, not the reply's.
        self._newlines = ""
        if self._open is None:
            return
        item = OutputItem(kind=self._open.kind, text=self._open.text, complete=complete)
        self._finish_item(events, item)

    def _finish_item(self, events: list[ChatEvent], item: OutputItem) -> None:
        assert self._open is not None
        events.append(ItemDone(self._open.index, item))
        self._items.append(item)
        self._open = None

    # -- function calls -------------------------------------------------------------

    def _call_text(self, text: str) -> None:
        self._call_body += text

    def _end_call(self, events: list[ChatEvent], *, truncated: bool, closed: bool = False) -> None:
        body, self._call_body = self._call_body, ""
        self._mode = _Mode.TEXT
        parsed = _parse_call(body)
        if truncated:  # unterminated: report what there is, marked unsafe to run
            name, arguments = parsed or _partial_call(body)
            self._emit_call(events, name, arguments, complete=False)
        elif parsed is not None:
            self._emit_call(events, *parsed, complete=True)
        else:
            # Not a call we can run: show the model's text rather than fail the reply.
            raw = self._tags.call_open + body + (self._tags.call_close if closed else "")
            self._emit_text("message", raw, events)

    def _emit_call(self, events: list[ChatEvent], name: str, args: str, *, complete: bool) -> None:
        spec = self._tools.get(name)
        namespace, member = (spec.namespace, spec.name) if spec else (None, name)
        call_id = self._call_ids(self._next_index)
        fields = {"call_id": call_id, "name": member, "namespace": namespace}
        self._start(events, "function_call", **fields)
        assert self._open is not None
        if args:
            events.append(TextDelta(self._open.index, "function_call", args))
        item = OutputItem(kind="function_call", text=args, complete=complete, **fields)
        self._finish_item(events, item)


def _partial_tag_length(text: str, tags: Sequence[str]) -> int:
    """Length of the longest suffix of ``text`` that is a proper prefix of a tag."""
    longest = max((len(tag) for tag in tags), default=1)
    for n in range(min(len(text), longest - 1), 0, -1):
        suffix = text[-n:]
        if any(tag.startswith(suffix) for tag in tags):
            return n
    return 0


def _parse_call(body: str) -> tuple[str, str] | None:
    """(qualified name, compact JSON arguments) from a call body, or None if malformed."""
    try:
        call = json.loads(body)
    except json.JSONDecodeError:
        return None
    if not isinstance(call, dict) or not isinstance(call.get("name"), str):
        return None
    arguments = call.get("arguments", {})
    if isinstance(arguments, str):  # some models send the arguments JSON-encoded
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            return None
    if not isinstance(arguments, dict):
        return None
    return call["name"], json.dumps(arguments, ensure_ascii=False, separators=(",", ":"))


def _partial_call(body: str) -> tuple[str, str]:
    """Best-effort (name, raw arguments text) from a call the token cap cut short."""
    name = ""
    at = body.find('"name"')
    if at >= 0:
        try:
            name, _ = json.JSONDecoder().raw_decode(body[body.index(":", at) + 1 :].lstrip())
        except (ValueError, json.JSONDecodeError):
            name = ""
    at = body.find('"arguments"')
    arguments = body[body.index(":", at) + 1 :].strip() if at >= 0 and ":" in body[at:] else ""
    return (name if isinstance(name, str) else ""), arguments


# -- registry -------------------------------------------------------------------------


ParserFactory = Callable[..., OutputParser]


@dataclass(frozen=True)
class ParserFamily:
    """A family of templates (recognized by ``matches``) and how to build its parser."""

    name: str
    matches: Callable[[ChatCodec], bool]
    build: ParserFactory


_FAMILIES: list[ParserFamily] = []


def register_parser(family: ParserFamily) -> None:
    """Add a family; later registrations are tried first."""
    _FAMILIES.insert(0, family)


_PROBE_CALL = ToolCall(call_id="call_p", name="probe_tool", arguments='{"x": 1}')
_PROBE = (
    ChatMessage(role="user", content="Hi"),
    ChatMessage(role="assistant", content="Ok.", reasoning="Hmm.", tool_calls=(_PROBE_CALL,)),
)


def _renders_hermes(codec: ChatCodec) -> bool:
    """True when the template writes calls as <tool_call> or reasoning as <think>."""
    try:
        text = codec.render(_PROBE, add_generation_prompt=True)
    except Exception:  # a template that cannot render the probe is not this family
        return False
    return CALL_OPEN in text or THINK_OPEN in text


def _hermes(**kwargs: Any) -> OutputParser:
    return TaggedOutputParser(HERMES_TAGS, **kwargs)


def _plain(**kwargs: Any) -> OutputParser:
    return TaggedOutputParser(PLAIN_TAGS, **kwargs)


register_parser(ParserFamily("plain", lambda codec: True, _plain))
register_parser(ParserFamily("hermes", _renders_hermes, _hermes))


def family_for(codec: ChatCodec) -> ParserFamily:
    """The first registered family whose probe matches the codec's template."""
    return next(f for f in _FAMILIES if f.matches(codec))


def parser_for(
    codec: ChatCodec,
    tools: Sequence[ToolSpec] = (),
    *,
    opens_reasoning: bool = False,
    call_ids: CallIds = random_call_id,
) -> OutputParser:
    """A fresh parser for one generation with this codec's template."""
    ends = tuple(dict.fromkeys((codec.eos_token, *END_OF_TURN)))
    return family_for(codec).build(
        tools=tools, end_tokens=ends, opens_reasoning=opens_reasoning, call_ids=call_ids
    )

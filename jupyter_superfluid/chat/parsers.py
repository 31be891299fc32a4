"""Incremental output parsers: streamed model text in, neutral output-item events out.

A parser is fed text deltas as the model produces them (special tokens included as their
text) and turns them into ``ItemStarted`` / ``TextDelta`` / ``ItemDone`` events for
reasoning, message text and function calls. It is driven by the template's syntax
(``chat.syntax``): its reasoning markers, the markers that open a section of tool calls
and how a call is written, the markers that end a turn. It holds back only the few
characters that may be the start of a marker, so text streams at token cadence; a call
is emitted whole once its section is complete.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, Protocol

from jupyter_superfluid.chat.syntax import markers
from jupyter_superfluid.chat.syntax.model import CallSyntax, Hole, TemplateSyntax
from jupyter_superfluid.chat.syntax.reading import ReadCall, partial_call, read_section
from jupyter_superfluid.chat.types import (
    ChatEvent,
    ItemDone,
    ItemKind,
    ItemStarted,
    OutputItem,
    TextDelta,
    ToolSpec,
)

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
    CALLS = "calls"  # inside a section of tool calls
    DONE = "done"  # after an end-of-turn marker


@dataclass
class _Open:
    index: int
    kind: ItemKind
    text: str = ""


def call_triggers(calls: CallSyntax, tools: Sequence[ToolSpec]) -> dict[str, int]:
    """The texts that start a section of calls in output, each with how much of it to
    skip before reading the section: its first marker, or its literal opening when it
    has no marker (``{"name": "``, ``functools[``); for a call written from its name on
    (functionary's ``NAME\n{…}`` after a prompt that ends in ``>>>``), each tool's name
    followed by what follows names, alone or after the separator of calls."""
    first = calls.call[0] if calls.call else ""
    if first is Hole.NAME:
        follow = calls.call[1] if len(calls.call) > 1 and isinstance(calls.call[1], str) else ""
        names = [t.qualified_name + follow for t in tools]
        found = {calls.section_open + name: 0 for name in names}
        if calls.sep.strip():
            found.update({calls.sep + name: len(calls.sep) for name in names})
        return found
    opening = (calls.section_open + (first if isinstance(first, str) else "")).lstrip()
    marker = markers.MARKER.match(opening)
    if marker is not None:
        return {marker.group(0): 0}
    return {opening.rstrip() or opening: 0}


class SyntaxParser:
    """Parses a template's reasoning, message text and tool calls by its syntax."""

    def __init__(
        self,
        syntax: TemplateSyntax,
        *,
        tools: Sequence[ToolSpec] = (),
        end_tokens: Sequence[str] = END_OF_TURN,
        opens_reasoning: bool = False,
        call_ids: CallIds = random_call_id,
        forced_call: bool = False,
    ) -> None:
        self._syntax = syntax
        self._forced = forced_call  # a grammar allows nothing but reasoning and the call
        self._tools = {t.qualified_name: t for t in tools}
        self._ends = tuple(dict.fromkeys(e for e in (*syntax.ends, *end_tokens) if e))
        self._call_ids = call_ids
        self._reasoning = syntax.reasoning
        self._calls = syntax.calls if tools else None
        self._triggers = call_triggers(self._calls, tools) if self._calls else {}
        self._layout_markers = syntax.layout_markers
        # What each mode watches for: fixed for the parser's life, and asked per token.
        r = self._reasoning
        self._watch_reasoning = self._markers((r.close,) if r else ())
        self._watch_text = self._markers(
            (r.open if r else "", *self._triggers, *self._layout_markers)
        )
        opened = opens_reasoning and self._reasoning is not None and self._reasoning.close
        self._mode = _Mode.REASONING if opened else _Mode.TEXT
        self._buf = ""  # text not yet handled: a possible marker start, or a section
        self._newlines = ""  # trailing newlines held back: they may be template layout
        self._open: _Open | None = None
        self._next_index = 0
        self._items: list[OutputItem] = []
        self._truncated = False  # finish() was told the token cap cut the output
        self._opened = 0  # length of the marker that opened the section being read
        # Layout the template writes before a turn's text, or between reasoning and text
        # (functionary's "all\n", Solar's "<|begin|>assistant<|content|>"), dropped once.
        self._skip = syntax.content_lead if self._mode is _Mode.TEXT else ""

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
        self._truncated = truncated
        if truncated and self._forced and self._mode is _Mode.TEXT:
            # What is held back is the start of the forced call's opening (or of another
            # marker): the grammar allows no message text here. Cut there, it is nothing.
            self._buf = ""
        self._drain(events, final=True)
        if self._mode is _Mode.CALLS:
            self._end_section(events, final=True, truncated=truncated)
        self._close(events, complete=not truncated)
        self._mode = _Mode.DONE
        return events

    # -- for hand-written families that read their own markup ------------------------

    def reasoning(self, text: str) -> list[ChatEvent]:
        """Emit reasoning text as it comes."""
        events: list[ChatEvent] = []
        self._emit_text("reasoning", text, events)
        return events

    def message(self, text: str) -> list[ChatEvent]:
        """Emit message text as it comes."""
        events: list[ChatEvent] = []
        self._emit_text("message", text, events)
        return events

    def raw_call(self, name: str, arguments: str, *, complete: bool = True) -> list[ChatEvent]:
        """Emit one whole call (``name`` qualified, ``arguments`` JSON text)."""
        events: list[ChatEvent] = []
        self._emit_raw_call(events, name, arguments, None, complete=complete)
        return events

    def close_item(self) -> list[ChatEvent]:
        """Finish the open reasoning or message item."""
        events: list[ChatEvent] = []
        self._close(events, complete=True)
        return events

    # -- scanning -------------------------------------------------------------------

    def _markers(self, tags: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(t for t in (*tags, *self._ends) if t)

    def _watched(self) -> tuple[str, ...]:
        return self._watch_reasoning if self._mode is _Mode.REASONING else self._watch_text

    def _drain(self, events: list[ChatEvent], *, final: bool) -> None:
        while self._mode is not _Mode.DONE and self._buf:
            if self._mode is _Mode.CALLS:
                if not self._section(events, final=final):
                    return
                continue
            if self._skip and not self._skipped(final=final):
                return
            tags = self._watched()
            hit = min(
                ((self._buf.find(tag), -len(tag), tag) for tag in tags if tag in self._buf),
                default=None,
            )
            if hit is None:
                keep = 0 if final else markers.overlap(self._buf, tags)
                self._text(self._buf[: len(self._buf) - keep], events)
                self._buf = self._buf[len(self._buf) - keep :]
                return
            at, _, tag = hit
            rest = self._buf[at:]
            if not final and any(len(t) > len(rest) and t.startswith(rest) for t in tags):
                # A longer marker may still complete here ("to=" vs "to=self<|message|>").
                self._text(self._buf[:at], events)
                self._buf = rest
                return
            self._text(self._buf[:at], events)
            self._on_tag(tag, events, at)
        if self._mode is _Mode.DONE:
            self._buf = ""  # nothing after the end of the turn belongs to the reply

    def _skipped(self, *, final: bool) -> bool:
        """Drop the pending layout literal if the buffer starts with it; False: wait."""
        lead = self._buf.lstrip("\n")
        if lead.startswith(self._skip.lstrip("\n")):
            self._buf = lead[len(self._skip.lstrip("\n")) :]
            self._skip = ""
        elif self._skip.lstrip("\n").startswith(lead) and not final:
            return False
        else:
            self._skip = ""
        return True

    def _on_tag(self, tag: str, events: list[ChatEvent], at: int) -> None:
        r = self._reasoning
        if tag in self._triggers and self._mode is _Mode.TEXT:
            self._close(events, complete=True)
            self._buf = self._buf[at + self._triggers[tag] :]  # read from its first marker
            self._opened = len(tag) - self._triggers[tag]
            self._mode = _Mode.CALLS
            return
        self._buf = self._buf[at + len(tag) :]
        if r is not None and tag == r.close and self._mode is _Mode.REASONING:
            self._close(events, complete=True)
            self._mode = _Mode.TEXT
            self._skip = r.gap if r.gap.strip() else ""
        elif tag in self._ends:
            self._close(events, complete=True)
            self._mode = _Mode.DONE
        elif r is not None and tag == r.open and self._mode is _Mode.TEXT:
            self._close(events, complete=True)
            self._mode = _Mode.REASONING
        # A layout marker (around the message text) is dropped.

    def _text(self, text: str, events: list[ChatEvent]) -> None:
        if text:
            kind: ItemKind = "reasoning" if self._mode is _Mode.REASONING else "message"
            self._emit_text(kind, text, events)

    # -- sections of calls ----------------------------------------------------------

    def _section(self, events: list[ChatEvent], *, final: bool) -> bool:
        """Read the buffered section; True when it was handled (buffer moved on)."""
        assert self._calls is not None
        end = self._first_end(self._buf)
        body = self._buf if end is None else self._buf[:end]
        found = read_section(self._calls, body, 0, self._tools, final=final or end is not None)
        if found is None:
            if end is None and not final:
                return False
            self._end_section(events, final=True, truncated=self._truncated and end is None)
            return True
        calls, consumed = found
        for read in calls:
            self._emit_call(events, read, complete=True)
        self._buf = self._buf[consumed:]
        self._mode = _Mode.TEXT
        return True

    def _first_end(self, text: str) -> int | None:
        """Where the turn ends in a section's text (not in the marker that opened it)."""
        hits = [at for e in self._ends if (at := text.find(e, self._opened)) >= 0]
        return min(hits) if hits else None

    def _end_section(self, events: list[ChatEvent], *, final: bool, truncated: bool) -> None:
        """The section could not be read whole: what it holds, as well as it can be."""
        assert self._calls is not None
        end = self._first_end(self._buf)
        body, rest = (self._buf, "") if end is None else (self._buf[:end], self._buf[end:])
        self._mode = _Mode.TEXT
        found = read_section(self._calls, body, 0, self._tools, final=True)
        if found is not None:
            for read in found[0]:
                self._emit_call(events, read, complete=True)
            body = body[found[1] :]
        elif truncated:
            # A call cut before its name was whole is no call (nothing to run or send
            # back, as OpenAI never shows a call without its name); its markup no text.
            name, arguments = partial_call(self._calls, body)
            if name:
                self._emit_raw_call(events, name, arguments, None, complete=False)
            body = ""
        self._buf = ""  # ``rest`` starts with the end of the turn: nothing after it counts
        if body.strip():
            # Not a call we can run: show the model's text rather than fail the reply.
            self._emit_text("message", body, events, verbatim=True)
        if rest:
            self._close(events, complete=True)
            self._mode = _Mode.DONE

    def _emit_call(self, events: list[ChatEvent], read: ReadCall, *, complete: bool) -> None:
        args = json.dumps(read.arguments, ensure_ascii=False, separators=(",", ":"))
        self._emit_raw_call(events, read.name, args, read.call_id, complete=complete)

    def _emit_raw_call(
        self, events: list[ChatEvent], name: str, args: str, call_id: str | None, *, complete: bool
    ) -> None:
        self._close(events, complete=True)
        spec = self._tools.get(name)
        namespace, member = (spec.namespace, spec.name) if spec else (None, name)
        fields: dict[str, Any] = {
            "call_id": call_id or self._call_ids(self._next_index),
            "name": member,
            "namespace": namespace,
        }
        self._start(events, "function_call", **fields)
        assert self._open is not None
        if args:
            events.append(TextDelta(self._open.index, "function_call", args))
        item = OutputItem(kind="function_call", text=args, complete=complete, **fields)
        self._finish_item(events, item)

    # -- reasoning and message text -------------------------------------------------

    def _emit_text(
        self, kind: ItemKind, text: str, events: list[ChatEvent], *, verbatim: bool = False
    ) -> None:
        if not verbatim:
            text = self._newlines + text
            if self._open is None:
                # The template puts newlines after markers and between items; spaces
                # before a marker (muse's " to=…") wait to see whether text follows.
                text = text.lstrip("\n")
                if not text.strip():
                    self._newlines = text
                    return
            body = text.rstrip("\n")
            self._newlines = text[len(body) :]
        else:
            body = self._newlines + text
            self._newlines = ""
        if not body:
            return
        if self._open is None or self._open.kind != kind:
            self._close(events, complete=True)
            self._start(events, kind)
        assert self._open is not None
        self._open.text += body
        events.append(TextDelta(self._open.index, kind, body))

    def _start(self, events: list[ChatEvent], kind: ItemKind, **fields: Any) -> None:
        self._open = _Open(self._next_index, kind)
        self._next_index += 1
        events.append(ItemStarted(self._open.index, kind, **fields))

    def _close(self, events: list[ChatEvent], *, complete: bool) -> None:
        # Newlines before a marker or the end are the template's layout, not the reply's.
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

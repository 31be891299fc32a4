"""gpt-oss's harmony format: a hand-written family, because it cannot be derived.

A harmony turn is a run of messages, each with a header and a body:
``<|channel|>analysis<|message|>…<|end|><|start|>assistant<|channel|>final<|message|>…
<|return|>``. The channel says what the body is (``analysis``: reasoning; ``final`` and a
``commentary`` without recipient: text for the user) and a recipient in the header
(``to=functions.NAME``) makes the body a call's JSON arguments, ended by ``<|call|>``.
What a body means hangs on its header, which probe renders that differ in one thing
cannot show; so this parser reads headers itself. OpenAI's ``openai-harmony`` package
is not used: it downloads its vocabulary on first use. Reasoning effort is the template's
own ``reasoning_effort`` (low/medium/high), found by the codec's probes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

from jupyter_superfluid.chat.grammars import Rules, gbnf_literal, gbnf_not
from jupyter_superfluid.chat.parsers import CallIds, SyntaxParser, random_call_id
from jupyter_superfluid.chat.syntax import markers
from jupyter_superfluid.chat.syntax.model import TemplateSyntax
from jupyter_superfluid.chat.types import ChatEvent, ToolSpec

START, CHANNEL, MESSAGE = "<|start|>", "<|channel|>", "<|message|>"
END, CALL, RETURN = "<|end|>", "<|call|>", "<|return|>"
_BODY_ENDS = (END, CALL, RETURN)
_RECIPIENT = re.compile(r"to=(\S+?)(?=<|\s|$)")
_CHANNEL_NAME = re.compile(r"<\|channel\|>\s*(\w+)")


def renders_harmony(rendered: str) -> bool:
    """Whether a render is harmony's: channels, messages and starts."""
    return all(m in rendered for m in (START, CHANNEL, MESSAGE))


def harmony_syntax(derived: TemplateSyntax) -> TemplateSyntax:
    """The syntax of a harmony template: what was derived, with the family's markers."""
    return TemplateSyntax(
        family="harmony",
        calls=derived.calls,
        reasoning=None,
        ends=(RETURN, CALL),
        describes_tools=derived.describes_tools,
        renders_calls=True,
        renders_results=derived.renders_results,
        result_shape=derived.result_shape,
        notes=("harmony: channels analysis/commentary/final read from each message's header",),
    )


@dataclass
class _Message:
    header: str = ""
    channel: str = ""
    recipient: str = ""


class HarmonyParser:
    """Reads a harmony turn message by message; bodies stream as their channel says."""

    def __init__(
        self,
        *,
        tools: Sequence[ToolSpec] = (),
        end_tokens: Sequence[str] = (),
        call_ids: CallIds = random_call_id,
    ) -> None:
        # Bodies are emitted through a plain SyntaxParser: it streams text and reasoning,
        # numbers the items and keeps the layout rules of every other family.
        self._out = SyntaxParser(TemplateSyntax("harmony"), tools=tools, call_ids=call_ids)
        self._tools = {t.qualified_name: t for t in tools}
        self._ends = tuple(e for e in end_tokens if e and e not in (*_BODY_ENDS, START))
        self._buf = ""
        self._message: _Message | None = _Message()  # None: between messages
        self._body = ""  # a call's arguments so far
        self._done = False
        self._reasoning = False

    @property
    def items(self) -> list:
        """The items finished so far, in output order."""
        return self._out.items

    @property
    def in_reasoning(self) -> bool:
        """Whether the output is inside an analysis body now."""
        return self._reasoning

    def feed(self, text: str) -> list[ChatEvent]:
        """Take the next text delta; return the events it completes."""
        self._buf += text
        return self._drain(final=False)

    def finish(self, truncated: bool = False) -> list[ChatEvent]:
        """End of output; close what is open (a cut call is marked incomplete)."""
        events = self._drain(final=True)
        if self._message is not None and self._message.recipient and not self._done:
            events += self._call(complete=False)
        return events + self._out.finish(truncated=truncated)

    def _drain(self, *, final: bool) -> list[ChatEvent]:
        events: list[ChatEvent] = []
        while self._buf and not self._done:
            if self._message is None or not self._message.channel:
                if not self._header(final=final):
                    break
                continue
            if not self._body_text(events, final=final):
                break
        if self._done:
            self._buf = ""
        return events

    def _header(self, *, final: bool) -> bool:
        """Read a message header up to ``<|message|>``; True when the buffer moved on."""
        if self._message is None:  # expect <|start|>assistant…
            at = self._buf.find(START)
            if at < 0:
                self._done = final or any(e in self._buf for e in self._ends)
                return False
            self._buf = self._buf[at + len(START) :]
            self._message = _Message()
        at = self._buf.find(MESSAGE)
        if at < 0:
            return False
        header = self._buf[:at]
        self._buf = self._buf[at + len(MESSAGE) :]
        channel = _CHANNEL_NAME.search(header)
        recipient = _RECIPIENT.search(header)
        self._message = _Message(header, channel.group(1) if channel else "final", "")
        if recipient and recipient.group(1) not in ("assistant", "user", "all"):
            self._message.recipient = recipient.group(1)
        self._reasoning = self._message.channel == "analysis" and not self._message.recipient
        return True

    def _body_text(self, events: list[ChatEvent], *, final: bool) -> bool:
        assert self._message is not None
        hits = [(self._buf.find(e), e) for e in (*_BODY_ENDS, *self._ends) if e in self._buf]
        if not hits:
            keep = 0 if final else markers.overlap(self._buf, (*_BODY_ENDS, *self._ends))
            self._take(self._buf[: len(self._buf) - keep], events)
            self._buf = self._buf[len(self._buf) - keep :]
            return False
        at, marker = min(hits)
        self._take(self._buf[:at], events)
        self._buf = self._buf[at + len(marker) :]
        if self._message.recipient:
            events += self._call(complete=True)
        else:
            events += self._out.close_item()
        self._reasoning = False
        self._message = None
        self._done = marker != END
        return True

    def _take(self, text: str, events: list[ChatEvent]) -> None:
        assert self._message is not None
        if not text:
            return
        if self._message.recipient:
            self._body += text
        elif self._reasoning:
            events += self._out.reasoning(text)
        else:
            events += self._out.message(text)

    def _call(self, *, complete: bool) -> list[ChatEvent]:
        assert self._message is not None
        name = self._message.recipient.removeprefix("functions.")
        body, self._body = self._body.strip(), ""
        try:
            args = json.loads(body) if body else {}
        except json.JSONDecodeError:
            args = None
        if not isinstance(args, dict):
            if complete:
                return self._out.message(body)
            return self._out.raw_call(name, body, complete=False)
        text = json.dumps(args, ensure_ascii=False, separators=(",", ":"))
        return self._out.raw_call(name, text, complete=complete)


def harmony_call_grammar(
    tools: Sequence[ToolSpec], *, only: str | None = None, reasoning_chars: int = 256
) -> str:
    """One forced call in the harmony layout the template renders, after an optional
    bounded analysis message."""
    chosen = [t for t in tools if only is None or t.qualified_name == only]
    if not chosen:
        raise ValueError(f"no tool named {only!r}" if only else "no tools to call")
    rules = Rules()
    analysis = gbnf_literal(f"{CHANNEL}analysis{MESSAGE}")
    rules.add("analysis-text", f"{gbnf_not('<')}{{0,{reasoning_chars}}}")
    rules.add("analysis", f"{analysis} analysis-text {gbnf_literal(END + START + 'assistant')}")
    alternatives = []
    for i, tool in enumerate(chosen):
        args = rules.schema(tool.parameters or {"type": "object"}, f"call{i}-args")
        head = gbnf_literal(f" to=functions.{tool.qualified_name}{CHANNEL}commentary json{MESSAGE}")
        alternatives.append(rules.add(f"call{i}", f"{head} {args} {gbnf_literal(CALL)}"))
    rules.add("call", " | ".join(alternatives))
    return rules.grammar("analysis? call")

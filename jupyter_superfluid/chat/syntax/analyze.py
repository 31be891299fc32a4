"""Deriving a template's syntax from its own renders (llama.cpp's differential analysis, in
Python): probe conversations that differ in one thing are rendered through the codec and
compared, giving the call syntax, the reasoning markers, the turn's end markers and the
shape tool results come back in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol

from jupyter_superfluid.chat.environment import TemplateRefusal
from jupyter_superfluid.chat.messages import MessageForm
from jupyter_superfluid.chat.syntax import calls as call_syntax
from jupyter_superfluid.chat.syntax import markers, reasoning
from jupyter_superfluid.chat.syntax.model import CallSyntax, ReasoningSyntax, TemplateSyntax
from jupyter_superfluid.chat.types import ChatMessage, ToolCall, ToolSpec

_SCHEMA = {"type": "object", "properties": {"sfkeyone": {"type": "string"}}}
PROBE_TOOLS = (
    ToolSpec(name=call_syntax.NAME_1, description="Probe one.", parameters=_SCHEMA),
    ToolSpec(name=call_syntax.NAME_2, description="Probe two.", parameters=_SCHEMA),
)
_USER = ChatMessage("user", "sfuserprobe")
_RESULT = "sfresultprobe"


class Codec(Protocol):
    """What the analysis needs of a codec."""

    template_source: str
    eos_token: str
    form: MessageForm
    supports_tools: bool
    thinking_switch: str | None

    def render(
        self,
        messages: Sequence[ChatMessage],
        *,
        tools: Sequence[ToolSpec] = (),
        add_generation_prompt: bool = True,
        template_kwargs: Mapping[str, Any] | None = None,
    ) -> str: ...


class _Renders:
    """Renders of one assistant turn after one user message, as the turn's own text."""

    def __init__(self, codec: Codec) -> None:
        self.codec = codec
        self.base = self._render([_USER], generation=False) or ""

    def _render(
        self,
        messages: Sequence[ChatMessage],
        *,
        generation: bool,
        kwargs: Mapping[str, Any] | None = None,
    ) -> str | None:
        try:
            return self.codec.render(
                messages,
                tools=PROBE_TOOLS,
                add_generation_prompt=generation,
                template_kwargs=kwargs,
            )
        except TemplateRefusal:
            return None

    def after(self, text: str | None) -> str | None:
        """What ``text`` adds to the one-message render."""
        if text is None:
            return None
        if text.startswith(self.base):
            return text[len(self.base) :]
        _, _, added, _ = markers.diff(self.base, text)
        return added

    def turn(
        self,
        calls: Sequence[ToolCall],
        content: str,
        reasoning_text: str | None = None,
        kwargs: Mapping[str, Any] | None = None,
    ) -> str | None:
        """The assistant turn's text."""
        reply = ChatMessage("assistant", content, reasoning=reasoning_text, tool_calls=tuple(calls))
        return self.after(self._render([_USER, reply], generation=False, kwargs=kwargs))

    def prompt(self, kwargs: Mapping[str, Any] | None = None) -> str | None:
        """The generation prompt's text (what it adds to the same render without it)."""
        base = self._render([_USER], generation=False, kwargs=kwargs)
        full = self._render([_USER], generation=True, kwargs=kwargs)
        if base is None or full is None:
            return None
        return full[len(base) :] if full.startswith(base) else markers.diff(base, full)[2]

    def result(self) -> tuple[bool, str]:
        """Whether a tool result renders, and its shape (the result shown as …)."""
        call = call_syntax.call("sfresultid", call_syntax.NAME_1, {})
        asked = [_USER, ChatMessage("assistant", tool_calls=(call,))]
        answered = [*asked, ChatMessage("tool", _RESULT, tool_call_id="sfresultid")]
        before = self._render(asked, generation=False)
        after = self._render(answered, generation=False)
        if before is None or after is None or _RESULT not in after:
            return False, ""
        shown = after[len(before) :] if after.startswith(before) else markers.diff(before, after)[2]
        shown = shown.replace(_RESULT, "…").replace(call_syntax.NAME_1, "NAME")
        return True, shown.replace(self.codec.form.call_ids.map("sfresultid"), "ID").strip()


def derive(codec: Codec) -> TemplateSyntax:
    """The syntax derived from the template's renders (calls may be None: not rendered)."""
    renders = _Renders(codec)
    prompt = renders.prompt() or ""
    user_close = renders.base.rpartition(_USER.content)[2]
    turn = call_syntax.frame(lambda c, text: renders.turn(c, text))
    end = markers.end_marker(turn.end, user_close, prompt) if turn else ""
    end = end or _next_turn_marker(renders)
    derived = call_syntax.derive(
        lambda c, text: renders.turn(c, text), codec.form.call_ids.map, end, prompt
    )
    switch = codec.thinking_switch
    on = {switch: True} if switch else {}
    header = renders.prompt(on) or prompt
    probe_call = (call_syntax.call("sfreasonid", call_syntax.NAME_1, {}),)
    found_reasoning = reasoning.derive(
        lambda r, c, call: renders.turn(probe_call if call else (), c, r or None, on),
        lambda thinking: renders.prompt({switch: thinking} if switch else {}),
        header,
        codec.template_source,
    )
    ends = [end, codec.eos_token]
    if derived is not None:
        ends.append(markers.end_marker(derived[1], user_close, prompt))
        ends = _not_opening(ends, derived[0])
    renders_results, shape = renders.result()
    layout = _layout_markers(turn, prompt, found_reasoning, ends)
    lead = turn.head[len(markers.common_prefix([turn.head, prompt])) :] if turn else ""
    if found_reasoning and (found_reasoning.open in lead or found_reasoning.close in lead):
        lead = ""  # an empty reasoning block: the reasoning markers take care of it
    return TemplateSyntax(
        family="derived",
        content_lead=lead if lead.strip() and turn and turn.head.startswith(prompt) else "",
        calls=_cut_at_ends(derived[0], ends) if derived else None,
        reasoning=found_reasoning,
        ends=tuple(dict.fromkeys(e for e in ends if e)),
        layout_markers=tuple(m.strip() for m in layout if m.strip()),
        describes_tools=codec.supports_tools,
        renders_calls=derived is not None,
        renders_results=renders_results,
        result_shape=shape,
    )


def _not_opening(ends: list[str], calls: CallSyntax) -> list[str]:
    """A marker that opens a section of calls does not end the turn (GigaChat 3 writes a
    call as a message after the text's ``<|message_sep|>``)."""
    first = calls.call[0] if calls.call and isinstance(calls.call[0], str) else ""
    lead = (calls.section_open + first).lstrip()
    return [e for e in ends if not (e and lead.startswith(e))]


def _cut_at_ends(calls: CallSyntax, ends: Sequence[str]) -> CallSyntax:
    """A section close stops where the turn ends: what a template writes after the end
    marker (Command R7B starts the next turn) is none of the model's output."""
    close = calls.section_close
    layout = list(calls.call)
    for end in (e for e in ends if e):
        if end in close:
            close = close[: close.index(end)]
        last = layout[-1]
        if isinstance(last, str) and end in last:
            layout[-1] = last[: last.index(end)]
    return replace(calls, section_close=close, call=tuple(p for p in layout if p != ""))


def _next_turn_marker(renders: _Renders) -> str:
    """For a template that writes nothing after an assistant's text (GLM), the marker
    that starts the next user turn ends it (``<|user|>``), as in the real vocabularies."""
    reply = ChatMessage("assistant", call_syntax.CONTENT)
    text = renders._render([_USER, reply, ChatMessage("user", "sfnextuser")], generation=False)
    if text is None or call_syntax.CONTENT not in text or "sfnextuser" not in text:
        return ""
    between = text.rpartition(call_syntax.CONTENT)[2].partition("sfnextuser")[0]
    return markers.first_marker(between)


def _layout_markers(
    turn: call_syntax.TurnFrame | None,
    prompt: str,
    found: ReasoningSyntax | None,
    ends: list[str],
) -> list[str]:
    """Markers a text turn puts around its text besides reasoning and its end
    (``<|START_RESPONSE|>``, ``<|open|>response<|sep|>``): layout, never the message."""
    if turn is None:
        return []
    head = turn.head[len(markers.common_prefix([turn.head, prompt])) :]
    end = turn.end.split(ends[0])[0] if ends and ends[0] else turn.end
    skip = {*(ends), *((found.open, found.close) if found else ())}
    return [m for m in markers.special_tokens([head, end]) if m not in skip]

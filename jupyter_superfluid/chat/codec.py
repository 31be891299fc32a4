"""Chat templates: render neutral chat messages to prompt text, and probe what a template does.

A ``ChatCodec`` wraps one model's Jinja chat template (as Hugging Face renders it) and
learns its properties by rendering probe conversations at construction, never from the
model's name: whether it renders per message (so a stored conversation can be forked
warm), whether it has a thinking switch or reasoning-effort levels, and whether tools
change its output. The codec takes plain strings; it knows nothing of the engine or HTTP.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

from jupyter_superfluid.chat import probes
from jupyter_superfluid.chat.types import ChatMessage, ToolCall, ToolSpec

REASONING_OPEN = "<think>"
REASONING_CLOSE = "</think>"

# Levels that turn a thinking switch off (spec: reasoning.effort).
_THINKING_OFF = frozenset({"none", "minimal"})


class _GenerationBlock(jinja2.ext.Extension):
    """Accept HF's ``{% generation %}...{% endgeneration %}`` and render its body as is."""

    tags = {"generation"}

    def parse(self, parser: Any) -> Any:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.Scope(body, lineno=lineno)


def _raise_exception(message: str) -> None:
    raise jinja2.exceptions.TemplateError(message)


def _tojson(
    value: Any,
    ensure_ascii: bool = False,
    indent: int | None = None,
    separators: tuple[str, str] | None = None,
    sort_keys: bool = False,
) -> str:
    # Jinja's own tojson escapes HTML and sorts keys; HF's does neither, and templates
    # (and the models trained on them) expect HF's output.
    return json.dumps(
        value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
    )


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


def _environment() -> ImmutableSandboxedEnvironment:
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True,
        lstrip_blocks=True,
        extensions=[_GenerationBlock, jinja2.ext.loopcontrols],
    )
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    return env


def _call_dict(call: ToolCall) -> dict[str, Any]:
    try:
        arguments: Any = json.loads(call.arguments) if call.arguments else {}
    except json.JSONDecodeError:
        arguments = call.arguments  # templates print a string argument as is
    return {
        "type": "function",
        "id": call.call_id,
        "function": {"name": call.qualified_name, "arguments": arguments},
    }


def message_dict(message: ChatMessage) -> dict[str, Any]:
    """The HF-style dict a chat template expects for one neutral message."""
    out: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.reasoning is not None:
        out["reasoning_content"] = message.reasoning
    if message.tool_calls:
        out["tool_calls"] = [_call_dict(c) for c in message.tool_calls]
    if message.tool_call_id is not None:
        out["tool_call_id"] = message.tool_call_id
    return out


def tool_dict(tool: ToolSpec) -> dict[str, Any]:
    """The OpenAI function-tool dict a chat template expects (qualified name)."""
    function: dict[str, Any] = {"name": tool.qualified_name}
    if tool.description is not None:
        function["description"] = tool.description
    function["parameters"] = tool.parameters or {"type": "object", "properties": {}}
    return {"type": "function", "function": function}


@dataclass(frozen=True)
class RenderSplit:
    """A render cut at message boundaries: ``head + "".join(messages) + generation_prompt``."""

    head: str
    messages: tuple[str, ...]
    generation_prompt: str


class ChatCodec:
    """One chat template, rendered HF-style, with properties found by probing it."""

    def __init__(self, template: str, *, bos_token: str = "", eos_token: str = "") -> None:
        self.template_source = template
        self.bos_token = bos_token
        self.eos_token = eos_token
        self._template = _environment().from_string(template)
        self.supports_tools: bool = probes.supports_tools(self)
        self.has_thinking_switch: bool = probes.has_thinking_switch(self)
        self.reasoning_efforts: tuple[str, ...] = probes.reasoning_efforts(self)
        self.renders_per_message: bool = probes.renders_per_message(self)

    def render(
        self,
        messages: Sequence[ChatMessage],
        *,
        tools: Sequence[ToolSpec] = (),
        add_generation_prompt: bool = True,
        template_kwargs: Mapping[str, Any] | None = None,
    ) -> str:
        """Render messages (and tools) to prompt text, as HF's apply_chat_template does."""
        context: dict[str, Any] = dict(template_kwargs or {})
        context.update(
            messages=[message_dict(m) for m in messages],
            # HF passes None when no tools are given; some templates test `tools is none`.
            tools=[tool_dict(t) for t in tools] or None,
            add_generation_prompt=add_generation_prompt,
            bos_token=self.bos_token,
            eos_token=self.eos_token,
        )
        return self._template.render(**context)

    def template_kwargs_for_effort(self, effort: str | None) -> dict[str, Any]:
        """Template variables for a reasoning effort, as the spec's reasoning.effort says."""
        if effort is None:
            return {}
        if effort in self.reasoning_efforts:
            return {"reasoning_effort": effort}
        if self.has_thinking_switch:
            return {"enable_thinking": effort not in _THINKING_OFF}
        return {}

    def generation_prompt(
        self,
        messages: Sequence[ChatMessage],
        *,
        tools: Sequence[ToolSpec] = (),
        template_kwargs: Mapping[str, Any] | None = None,
    ) -> str:
        """The text ``add_generation_prompt`` appends after these messages."""
        with_prompt = self.render(messages, tools=tools, template_kwargs=template_kwargs)
        without = self.render(
            messages, tools=tools, add_generation_prompt=False, template_kwargs=template_kwargs
        )
        if not with_prompt.startswith(without):
            raise ValueError("the generation prompt does not extend the conversation's render")
        return with_prompt[len(without) :]

    def generation_opens_reasoning(self, template_kwargs: Mapping[str, Any] | None = None) -> bool:
        """True when the generation prompt ends inside an open ``<think>`` (parse as reasoning)."""
        probe = (ChatMessage(role="user", content="Hi"),)
        # The whole render's end, not generation_prompt(): that raises for templates whose
        # prompt render does not extend the plain one, and this probe has no other tags.
        prompt = self.render(probe, template_kwargs=template_kwargs).rstrip()
        opened = prompt.rfind(REASONING_OPEN)
        return opened >= 0 and prompt.rfind(REASONING_CLOSE) < opened

    def split(
        self,
        messages: Sequence[ChatMessage],
        *,
        tools: Sequence[ToolSpec] = (),
        template_kwargs: Mapping[str, Any] | None = None,
    ) -> RenderSplit:
        """Cut a render into head, each message's own text and the generation prompt.

        For the generation layer, to log each message's text (and tokens) as its own
        session event so a later request can append only new messages. Meaningful only
        when ``renders_per_message`` holds; raises ValueError where a render of k+1
        messages does not extend the render of k.
        """
        kw = template_kwargs
        try:
            head = self.render([], tools=tools, add_generation_prompt=False, template_kwargs=kw)
        except Exception:  # templates may index messages[0]; then the head joins message 0
            head = ""
        pieces: list[str] = []
        previous = head
        for k in range(1, len(messages) + 1):
            text = self.render(
                messages[:k], tools=tools, add_generation_prompt=False, template_kwargs=kw
            )
            if not text.startswith(previous):
                raise ValueError(f"rendering message {k - 1} rewrites the text before it")
            pieces.append(text[len(previous) :])
            previous = text
        prompt = self.generation_prompt(messages, tools=tools, template_kwargs=kw)
        return RenderSplit(head=head, messages=tuple(pieces), generation_prompt=prompt)

    def render_turn_tail(
        self,
        messages: Sequence[ChatMessage],
        reply: ChatMessage,
        generated: str,
        *,
        tools: Sequence[ToolSpec] = (),
        template_kwargs: Mapping[str, Any] | None = None,
    ) -> str | None:
        """The text a template puts after a generated reply, or None if it renders otherwise.

        For the generation layer: a session holds the prompt (ending in the generation
        prompt) plus the generated text; appending this tail makes it equal to a fresh
        render of ``messages + [reply]``, so the next message can be appended warm. None
        means the reply renders differently from what was generated: rebuild instead.
        """
        kw = template_kwargs
        prompt = self.render(messages, tools=tools, template_kwargs=kw)
        full = self.render(
            [*messages, reply], tools=tools, add_generation_prompt=False, template_kwargs=kw
        )
        start = prompt + generated
        if not full.startswith(start):
            return None
        return full[len(start) :]

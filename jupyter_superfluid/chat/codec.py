"""Chat templates: render neutral chat messages to prompt text, and probe what a template does.

A ``ChatCodec`` wraps one model's Jinja chat template (rendered as Hugging Face does, with
llama.cpp's leniencies) and learns its properties by rendering probe conversations at
construction, never from the model's name: the form it takes messages in (system role,
call id shape, argument form), whether it renders per message (so a stored conversation
can be forked warm), its thinking switch and reasoning-effort levels, and the syntax of
its tool calls and reasoning (``syntax``), from which come the output parser and the
grammar that forces a call. The codec takes plain strings; it knows nothing of the engine
or HTTP.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from jupyter_superfluid.chat import grammars, probes
from jupyter_superfluid.chat.call_grammars import call_grammar
from jupyter_superfluid.chat.environment import TemplateRefusal, compile_template
from jupyter_superfluid.chat.harmony import (
    HarmonyParser,
    harmony_call_grammar,
    harmony_syntax,
    renders_harmony,
)
from jupyter_superfluid.chat.messages import (
    ALNUM9_ID,
    DEFAULT_FORM,
    MessageForm,
    template_messages,
    tools_context,
)
from jupyter_superfluid.chat.parsers import (
    END_OF_TURN,
    CallIds,
    OutputParser,
    SyntaxParser,
    random_call_id,
)
from jupyter_superfluid.chat.syntax import analyze, generic
from jupyter_superfluid.chat.syntax.model import ReasoningSyntax, TemplateSyntax
from jupyter_superfluid.chat.types import ChatMessage, ToolSpec

# Levels that turn a thinking switch off (spec: reasoning.effort).
_THINKING_OFF = frozenset({"none", "minimal"})


OPENINGS_REMEMBERED = 256  # generation prompts a codec keeps (per tools and arguments)


class ChatCodec:
    """One chat template, rendered HF-style, with properties found by probing it."""

    def __init__(
        self,
        template: str,
        *,
        bos_token: str = "",
        eos_token: str = "",
        end_tokens: Sequence[str] = (),
    ) -> None:
        self.template_source = template
        self.bos_token = bos_token
        self.eos_token = eos_token
        self.end_tokens = tuple(end_tokens)  # the texts of the model's end-of-generation tokens
        self._template = compile_template(template)
        self.syntax: TemplateSyntax | None = None  # while None, render() renders plainly
        self.form: MessageForm = DEFAULT_FORM
        self.form = probes.message_form(self, template)
        self.thinking_switch: str | None = probes.thinking_switch(self)
        thinking = {self.thinking_switch: True} if self.thinking_switch else {}
        self.form = replace(
            self.form, reasoning_key=probes.reasoning_key(self, self.form, thinking)
        )
        self.supports_tools: bool = probes.supports_tools(self)
        self.reasoning_efforts: tuple[str, ...] = probes.reasoning_efforts(self)
        self.syntax = _template_syntax(self)
        self.renders_per_message: bool = probes.renders_per_message(self)
        self._opens_reasoning: dict[str, bool] = {}  # per template arguments, found once
        self._openings: dict[str, str | None] = {}  # per tools and arguments, found once

    @property
    def has_thinking_switch(self) -> bool:
        """Whether a template variable switches thinking on and off."""
        return self.thinking_switch is not None

    def render_dicts(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: Mapping[str, Any] | None = None,
        add_generation_prompt: bool = True,
        template_kwargs: Mapping[str, Any] | None = None,
    ) -> str:
        """Render template-ready dicts as they are (for probes); raises TemplateRefusal.

        ``tools`` holds the variables that carry the tools (``messages.tools_context``).
        """
        context: dict[str, Any] = dict(template_kwargs or {})
        # HF passes None when no tools are given; some templates test `tools is none`.
        context.update(tools or {"tools": None})
        context.update(
            messages=messages,
            add_generation_prompt=add_generation_prompt,
            bos_token=self.bos_token,
            eos_token=self.eos_token,
        )
        try:
            return self._template.render(**context)
        except TemplateRefusal:
            raise
        except Exception as err:  # a template may raise anything on what it cannot carry
            raise TemplateRefusal(_refusal_text(err)) from err

    def render(
        self,
        messages: Sequence[ChatMessage],
        *,
        tools: Sequence[ToolSpec] = (),
        add_generation_prompt: bool = True,
        template_kwargs: Mapping[str, Any] | None = None,
    ) -> str:
        """Render messages (and tools) to prompt text, in the form the template takes them.

        What the template leaves out of tool calling is carried in the generic format
        (``syntax.generic``). Raises TemplateRefusal (with the template's own message)
        when it refuses the conversation.
        """
        if self.syntax is not None and generic.needs_adapting(self.syntax):
            messages = generic.adapt(messages, tools, self.syntax)
        return self.render_dicts(
            template_messages(messages, self.form),
            tools=tools_context(tools, self.form),
            add_generation_prompt=add_generation_prompt,
            template_kwargs=template_kwargs,
        )

    def template_kwargs_for_effort(self, effort: str | None) -> dict[str, Any]:
        """Template variables for a reasoning effort, as the spec's reasoning.effort says."""
        if effort is None:
            return {}
        if effort in self.reasoning_efforts:
            return {"reasoning_effort": effort}
        if self.thinking_switch:
            return {self.thinking_switch: effort not in _THINKING_OFF}
        if self.reasoning_efforts and effort in _THINKING_OFF:
            # No way to switch reasoning off: the least of the template's levels.
            return {"reasoning_effort": self.reasoning_efforts[0]}
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

    def generation_opening(
        self, tools: Sequence[ToolSpec] = (), template_kwargs: Mapping[str, Any] | None = None
    ) -> str | None:
        """What the generation prompt appends, found on a one-message probe once per tools
        and template arguments; None where the template refuses the probe."""
        key = json.dumps(
            [
                template_kwargs or {},
                [[t.qualified_name, t.description, t.parameters] for t in tools],
            ],
            sort_keys=True,
            default=str,
        )
        if key in self._openings:
            return self._openings[key]
        probe = (ChatMessage(role="user", content="Hi"),)
        try:
            found: str | None = self.generation_prompt(
                probe, tools=tools, template_kwargs=template_kwargs
            )
        except (TemplateRefusal, ValueError):
            found = None
        if len(self._openings) >= OPENINGS_REMEMBERED:  # tool lists are the clients': bounded
            self._openings.clear()
        self._openings[key] = found
        return found

    def generation_opens_reasoning(self, template_kwargs: Mapping[str, Any] | None = None) -> bool:
        """True when the generation prompt leaves the model inside its reasoning."""
        key = json.dumps(template_kwargs or {}, sort_keys=True, default=str)
        known = self._opens_reasoning.get(key)
        if known is None:
            known = self._opens_reasoning[key] = self._probe_opens_reasoning(template_kwargs)
        return known

    def _probe_opens_reasoning(self, template_kwargs: Mapping[str, Any] | None) -> bool:
        found = self.syntax.reasoning if self.syntax else None
        if found is None or not found.close:
            return False
        probe = (ChatMessage(role="user", content="Hi"),)
        try:
            with_prompt = self.render(probe, template_kwargs=template_kwargs)
            without = self.render(
                probe, add_generation_prompt=False, template_kwargs=template_kwargs
            )
        except TemplateRefusal:
            return False
        tail = with_prompt[len(without) :] if with_prompt.startswith(without) else with_prompt
        if not found.open:  # the template leaves the opening to the prompt (Apriel)
            return not tail.rstrip().endswith(found.close)
        return tail.rfind(found.open) > tail.rfind(found.close)

    def output_parser(
        self,
        tools: Sequence[ToolSpec] = (),
        *,
        opens_reasoning: bool = False,
        end_tokens: Sequence[str] = (),
        call_ids: CallIds = random_call_id,
        forced_call: bool = False,
    ) -> OutputParser:
        """A fresh parser for one generation with this template (``forced_call``: a
        grammar forces a call, so the output holds no message text)."""
        syntax = self.syntax or TemplateSyntax("plain")
        ends = tuple(dict.fromkeys((self.eos_token, *self.end_tokens, *end_tokens, *END_OF_TURN)))
        if syntax.family == "harmony":
            return HarmonyParser(tools=tools, end_tokens=ends, call_ids=call_ids)
        if tools and syntax.calls is None:
            syntax = replace(syntax, calls=generic.GENERIC_CALLS)
        return SyntaxParser(
            syntax,
            tools=tools,
            end_tokens=ends,
            opens_reasoning=opens_reasoning,
            call_ids=call_ids,
            forced_call=forced_call and bool(tools),
        )

    def call_grammar(
        self, tools: Sequence[ToolSpec], *, only: str | None = None, opens_reasoning: bool = False
    ) -> str:
        """The grammar that forces one call to one of ``tools`` (or to ``only``), written
        as the template writes calls (or in the generic format)."""
        syntax = self.syntax or TemplateSyntax("plain")
        if syntax.family == "harmony":
            return harmony_call_grammar(tools, only=only)
        return call_grammar(
            syntax.calls or generic.GENERIC_CALLS,
            tools,
            only=only,
            call_id=self._fresh_call_id(),
            reasoning=self._reasoning(opens_reasoning),
        )

    def json_grammar(
        self, schema: Mapping[str, Any] | None, *, opens_reasoning: bool = False
    ) -> str:
        """The grammar for one JSON value matching ``schema`` (any object when None)."""
        reasoning = self._reasoning(opens_reasoning)
        if schema is None:
            return grammars.json_object_grammar(reasoning=reasoning)
        return grammars.json_schema_grammar(schema, reasoning=reasoning)

    def _reasoning(self, opens: bool) -> ReasoningSyntax | None:
        found = self.syntax.reasoning if self.syntax else None
        return found if opens and found is not None and found.close else None

    def _fresh_call_id(self) -> str:
        """A new call id in the shape the template demands."""
        if self.form.call_ids is ALNUM9_ID:
            return ALNUM9_ID.map(secrets.token_hex(8))
        return f"call_{secrets.token_hex(6)}"


def _template_syntax(codec: ChatCodec) -> TemplateSyntax:
    """Derive the syntax; a hand-written family where the render says it is one."""
    derived = analyze.derive(codec)
    try:
        probe = codec.render(
            [ChatMessage("user", "Hi"), ChatMessage("assistant", "Ok.")],
            add_generation_prompt=False,
        )
    except TemplateRefusal:
        probe = ""
    if renders_harmony(probe):
        return harmony_syntax(derived)
    if not derived.renders_calls:
        return replace(derived, family="generic")
    return derived


def _refusal_text(err: Exception) -> str:
    """A template error as a client may read it: the template's own words where it has any."""
    message = str(err) or type(err).__name__
    return f"the model's chat template refuses this conversation: {message}"

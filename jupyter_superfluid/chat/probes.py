"""Probes that learn a chat template's properties by rendering sample conversations.

Properties are found by what a template does, never by a model's name: a template that
renders each message on its own can have a stored conversation forked warm; one that
rewrites earlier turns (e.g. drops their reasoning) must be rebuilt. Any render that
raises counts against the property, because a guess in its favour would fork wrongly.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol

import jinja2
import jinja2.meta

from jupyter_superfluid.chat.environment import TemplateEnvironment
from jupyter_superfluid.chat.messages import (
    CALL_ID_FORMS,
    MessageForm,
    message_dict,
    tools_context,
)
from jupyter_superfluid.chat.types import ChatMessage, ToolCall, ToolSpec

# Every level an OpenAI client may send; a template "lists" those it reacts to.
EFFORT_LEVELS = ("none", "minimal", "low", "medium", "high", "xhigh")
# When a template pastes any value into its text, rendering cannot tell its levels apart;
# these are the levels every reasoning model accepts.
_INTERPOLATED_LEVELS = ("low", "medium", "high")
_NONSENSE_LEVEL = "zz-superfluid-probe"


class Renderer(Protocol):
    """What a probe needs: the codec's render methods."""

    def render_dicts(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: Mapping[str, Any] | None = None,
        add_generation_prompt: bool = True,
        template_kwargs: Mapping[str, Any] | None = None,
    ) -> str: ...

    def render(
        self,
        messages: Sequence[ChatMessage],
        *,
        tools: Sequence[ToolSpec] = (),
        add_generation_prompt: bool = True,
        template_kwargs: Mapping[str, Any] | None = None,
    ) -> str: ...


_SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
PROBE_TOOLS = (
    ToolSpec(name="get_weather", description="Weather for a city.", parameters=_SCHEMA),
    ToolSpec(name="lookup", description="Look a city up.", parameters=_SCHEMA, namespace="geo"),
)
_CALL = ToolCall(call_id="call_p1", name="get_weather", arguments='{"city": "Paris"}')
_NS_CALL = ToolCall(call_id="call_p2", name="lookup", namespace="geo", arguments='{"city": "Oslo"}')

_SYSTEM = ChatMessage(role="system", content="Be terse.")
_USER = ChatMessage(role="user", content="Hello there.")
_USER_2 = ChatMessage(role="user", content="And the weather?")
PROBE_CONVERSATIONS: tuple[tuple[ChatMessage, ...], ...] = (
    (
        _SYSTEM,
        _USER,
        ChatMessage(role="assistant", content="Hi."),
        _USER_2,
        ChatMessage(role="assistant", content="Sunny.", reasoning="Guess the weather."),
        ChatMessage(role="user", content="Thanks."),
    ),
    (
        _SYSTEM,
        _USER_2,
        ChatMessage(role="assistant", reasoning="Call a tool.", tool_calls=(_CALL,)),
        ChatMessage(role="tool", content="18 C", tool_call_id="call_p1"),
        ChatMessage(role="assistant", content="Mild.", reasoning="Read the result."),
        ChatMessage(role="user", content="Both cities?"),
        ChatMessage(role="assistant", content="Checking.", tool_calls=(_CALL, _NS_CALL)),
        ChatMessage(role="tool", content="18 C", tool_call_id="call_p1"),
        ChatMessage(role="tool", content="Oslo, Norway", tool_call_id="call_p2"),
        ChatMessage(role="assistant", content="Done.", reasoning="Summarize."),
    ),
)


def _try_render(codec: Renderer, messages: Sequence[ChatMessage], **kwargs: Any) -> str | None:
    try:
        return codec.render(messages, **kwargs)
    except Exception:  # a template may raise on anything it cannot carry
        return None


def _extends_per_message(codec: Renderer, messages: Sequence[ChatMessage], tools: Any) -> bool:
    previous = ""
    for k in range(1, len(messages) + 1):
        text = _try_render(codec, messages[:k], tools=tools, add_generation_prompt=False)
        if text is None or not text.startswith(previous):
            return False
        previous = text
    return True


def renders_per_message(codec: Renderer) -> bool:
    """True when rendering k+1 messages extends rendering k, for every probe conversation."""
    checked = 0
    for tools in ((), PROBE_TOOLS):
        for messages in PROBE_CONVERSATIONS:
            # A conversation the template cannot render at all can never be stored, so it
            # says nothing about forking; any prefix failing to render does.
            if _try_render(codec, messages, tools=tools, add_generation_prompt=False) is None:
                continue
            if not _extends_per_message(codec, messages, tools):
                return False
            checked += 1
    return checked > 0


def _renders_differ(codec: Renderer, a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    for messages in ((_USER,), PROBE_CONVERSATIONS[0]):
        first = _try_render(codec, messages, template_kwargs=a)
        second = _try_render(codec, messages, template_kwargs=b)
        if first is not None and second is not None and first != second:
            return True
    return False


# The template variables that switch thinking on and off, as real templates name them.
THINKING_SWITCHES = ("enable_thinking", "thinking")
_REASONING_KEYS = ("reasoning_content", "reasoning", "thinking", "thought")


def thinking_switch(codec: Renderer) -> str | None:
    """The variable that renders differently set True and False (None: no switch)."""
    for name in THINKING_SWITCHES:
        if _renders_differ(codec, {name: True}, {name: False}):
            return name
    return None


def reasoning_key(codec: Renderer, form: MessageForm, kwargs: Mapping[str, Any]) -> str:
    """The message key the template shows an assistant's reasoning from."""
    marker = "Superfluid reasoning probe."
    for key in _REASONING_KEYS:
        reply = {"role": "assistant", "content": "Done.", key: marker}
        try:
            text = codec.render_dicts(
                [{"role": "user", "content": "Hi"}, reply],
                tools=tools_context((), form),
                add_generation_prompt=False,
                template_kwargs=kwargs,
            )
        except Exception:  # this key is one the template trips over
            continue
        if marker in text:
            return key
    return form.reasoning_key


def reasoning_efforts(codec: Renderer) -> tuple[str, ...]:
    """The ``reasoning_effort`` levels the template reacts to (empty when it ignores them)."""
    messages = (_SYSTEM, _USER)
    nonsense = _try_render(codec, messages, template_kwargs={"reasoning_effort": _NONSENSE_LEVEL})
    renders = {
        level: _try_render(codec, messages, template_kwargs={"reasoning_effort": level})
        for level in EFFORT_LEVELS
    }
    ok = {level: text for level, text in renders.items() if text is not None}
    if len(set(ok.values())) <= 1 and (nonsense is None or nonsense in ok.values()):
        return ()  # every level renders alike: the template ignores the variable
    if nonsense is not None and _NONSENSE_LEVEL in nonsense:
        return tuple(level for level in _INTERPOLATED_LEVELS if level in ok)
    # A level the template knows renders other than an unknown one (or the unknown raises).
    return tuple(level for level, text in ok.items() if text != nonsense)


def supports_tools(codec: Renderer) -> bool:
    """True when passing tools changes the render (the template shows them to the model)."""
    messages = (_SYSTEM, _USER)
    plain = _try_render(codec, messages)
    with_tools = _try_render(codec, messages, tools=PROBE_TOOLS)
    return plain is not None and with_tools is not None and plain != with_tools


def _renders_dicts(
    codec: Renderer, messages: Sequence[ChatMessage], form: MessageForm
) -> str | None:
    dicts = [message_dict(m, form) for m in messages]
    try:
        return codec.render_dicts(dicts, tools=tools_context(PROBE_TOOLS, form))
    except Exception:  # this form is one the template refuses
        return None


def _base_form(codec: Renderer, source: str) -> MessageForm:
    """How tools are passed: ``functions`` for templates that never read ``tools``, and
    [] rather than None where the template loops over them unguarded."""
    variables = template_variables(source)
    functions = "functions" in variables and "tools" not in variables
    user = [{"role": "user", "content": "Hi"}]
    for empty in (False, True):
        form = MessageForm(empty_tools=empty, functions_variable=functions)
        try:
            codec.render_dicts(user, tools=tools_context((), form))
            return form
        except Exception:  # try passing no tools the other way
            continue
    return MessageForm(functions_variable=functions)


def has_system_role(codec: Renderer, form: MessageForm) -> bool:
    """True when a leading system message renders (its text appears in the prompt)."""
    marker = "Superfluid system probe."
    messages = [{"role": "system", "content": marker}, {"role": "user", "content": "Hi"}]
    try:
        return marker in codec.render_dicts(messages, tools=tools_context((), form))
    except Exception:  # the template refuses system messages
        return False


def message_form(codec: Renderer, source: str) -> MessageForm:
    """The form the template takes messages in: system role, call id shape, argument form.

    A form is tried on a conversation with a tool call and its result; the first one
    the template renders wins (object arguments before strings, any id before shaped).
    """
    base = _base_form(codec, source)
    base = replace(base, system_role=has_system_role(codec, base))
    call = ChatMessage("assistant", tool_calls=(_CALL,))
    conversation = (_USER, call, ChatMessage("tool", "18 C", tool_call_id=_CALL.call_id))
    for object_arguments in (True, False):
        for ids in CALL_ID_FORMS:
            form = replace(base, call_ids=ids, object_arguments=object_arguments)
            if _renders_dicts(codec, conversation, form) is not None:
                return form
    return base


def template_variables(source: str) -> frozenset[str]:
    """The variables a template reads from its context (as Jinja's analysis finds them)."""
    try:
        return frozenset(jinja2.meta.find_undeclared_variables(TemplateEnvironment().parse(source)))
    except jinja2.TemplateError:
        return frozenset()

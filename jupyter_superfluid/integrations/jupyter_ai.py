"""A Jupyter AI 3 persona answering from this server's models, over its durable conversations.

Installed with the ``jupyter-ai`` extra (``pip install "jupyter_superfluid[jupyter-ai]"``)
and registered under the ``jupyter_ai.personas`` entry point group, so Jupyter AI's
persona manager offers it in every chat as **Superfluid**.

Each Jupyter AI chat is one conversation of this server (``/v1/conversations``): the
first message creates it, with ``metadata`` ``{"title": <first message>,
"jupyter_ai_chat": <chat path>, "jupyter_ai_chat_id": <chat id>}``, and every message
is ``POST /v1/responses`` with ``conversation`` and ``stream: true``, so each answer
continues the conversation warm and the chat is listed beside the chat panel's own.

Finding a chat's conversation again: the persona keys it on the chat's stable id
(``self.chat.get_id()``, kept in the ``.chat`` file's metadata, so it survives renames
and moves) and asks the server, ``GET /v1/conversations?q=<chat id>``, keeping the match
whose ``metadata.jupyter_ai_chat_id`` is that id. The conversation lives in the server's
durable store, so a Jupyter restart (which restarts the server and the personas, whose
own state is lost) finds it the same way; the persona only remembers it in memory to
skip the search. A chat whose conversation was deleted starts a new one.

The persona runs inside the Jupyter server and talks to it over HTTP only, as the
kernel side does: ``self.parent`` is the persona manager, whose parent, the persona
manager extension, holds the ``ServerApp``; its ``connection_url`` and its identity
provider's token (``Authorization: token …``) are the address. ``server_url`` and
``token`` (``c.SuperfluidPersona.…``) override that, ``model`` picks the model (the
first served one otherwise). Errors (the model still loading past ``load_wait``
seconds, an unknown model, the server unreachable) are said in the chat, briefly.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from traitlets import Float, Int, Unicode

from jupyter_superfluid.integrations.superfluid_chat import (
    EMPTY_ANSWER,
    ChatConversations,
    ChatError,
    ConversationGone,
    Turn,
    find_server,
)

try:
    from jupyter_ai_persona_manager import BasePersona, PersonaDefaults
    from jupyter_ai_persona_manager.awareness_models import ModelConfiguration, ModelOption
except ImportError as err:  # the extra is not installed
    raise ImportError(
        "jupyter_superfluid.integrations.jupyter_ai needs Jupyter AI's persona manager: "
        'pip install "jupyter_superfluid[jupyter-ai]"'
    ) from err

AVATAR = Path(__file__).with_name("avatar.svg")
SYSTEM_PROMPT = (
    "You are Superfluid, a language model running locally inside this Jupyter server. "
    "Answer in Markdown; put code in fenced code blocks."
)


class SuperfluidPersona(BasePersona):
    """Answers from this server's models, each chat one of its conversations."""

    model = Unicode(
        "", help="The model that answers (a served model's id); empty: the first served one."
    ).tag(config=True)
    server_url = Unicode(
        "", help="The superfluid server's root URL; empty: this Jupyter server's own."
    ).tag(config=True)
    token = Unicode(
        "", help="The token sent as 'Authorization: token …'; empty: this Jupyter server's."
    ).tag(config=True)
    max_output_tokens = Int(0, help="Most tokens an answer may have; 0: the server's default.").tag(
        config=True
    )
    load_wait = Float(
        300.0, help="Seconds to wait for a model still downloading or loading before saying so."
    ).tag(config=True)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._conversations: ChatConversations | None = None

    @property
    def defaults(self) -> PersonaDefaults:
        """Name, description, avatar and system prompt."""
        return PersonaDefaults(
            name="Superfluid",
            description="Answers from the local models of this Jupyter server.",
            avatar_path=str(AVATAR),
            system_prompt=SYSTEM_PROMPT,
        )

    def conversations(self) -> ChatConversations:
        """The server's conversations, its address found on first use."""
        if self._conversations is None:
            address = find_server(self, self.server_url, self.token)
            self._conversations = ChatConversations(address)
        return self._conversations

    async def prepare(self) -> None:
        """Offer the served models in Jupyter AI's model picker (quietly, if none answer)."""
        try:
            ids = await self.conversations().model_ids()
        except ChatError as err:
            self.log.warning("Superfluid persona: %s", err)
            return
        options = [ModelOption(id=model_id) for model_id in ids]
        self.report_model_configuration(
            ModelConfiguration(current=self.model or None, options=options)
        )

    async def update_model(self, model_id: str) -> None:
        """Answer from ``model_id`` from now on (picked in Jupyter AI's model picker)."""
        self.model = model_id

    async def process_message(self, message: Any) -> None:
        """Send the message to the chat's conversation and stream the answer into the chat."""
        try:
            await self._answer(message)
        except ChatError as err:
            self.send_message(f"⚠️ {err}")
        except Exception as err:  # said briefly in the chat; the traceback goes to the log
            self.log.exception("Superfluid persona: the answer failed")
            self.send_message(f"⚠️ The answer failed ({type(err).__name__}: {err}).")

    async def _answer(self, message: Any) -> None:
        """The answer, streamed; a deleted conversation is replaced by a new one, once."""
        conversations = self.conversations()
        chat_id = self.chat.get_id()
        for attempt in range(2):
            conv_id = await conversations.find(chat_id)
            if conv_id is None:
                conv_id = await conversations.create(chat_id, self._chat_path(), message.body)
            try:
                await self._stream(conv_id, message.body)
                return
            except ConversationGone:
                conversations.forget(chat_id)
                if attempt:
                    raise

    async def _stream(self, conv_id: str, text: str) -> None:
        """Stream one answer into the chat, or say that the model gave none.

        The first delta is awaited here, so an answer that does not start (a model still
        loading, an unknown model) is said without a half-made message.
        """
        stream = self._deltas(conv_id, text).__aiter__()
        self.set_status()
        try:
            first = await stream.__anext__()
        except StopAsyncIteration:
            self.clear_status()
            self.send_message(EMPTY_ANSWER)
            return
        except BaseException:
            self.clear_status()
            raise

        async def deltas() -> AsyncIterator[str]:
            yield first
            async for delta in stream:
                yield delta

        await self.stream_message(deltas())

    async def _deltas(self, conv_id: str, text: str) -> AsyncIterator[str]:
        """The answer's text deltas from the server."""
        conversations = self.conversations()
        body: dict[str, Any] = {
            "model": self.model or await conversations.first_model(),
            "input": [{"role": "user", "content": [{"type": "input_text", "text": text}]}],
            "instructions": self.system_prompt,
        }
        if self.max_output_tokens > 0:
            body["max_output_tokens"] = self.max_output_tokens
        stream = conversations.answer(
            conv_id, body, Turn(), load_wait=self.load_wait, on_wait=self._waiting
        )
        async for delta in stream:
            yield delta

    def _waiting(self, why: str) -> None:
        """Show, while the model loads, that the persona waits for it."""
        self.log.info("Superfluid persona waiting: %s", why)
        self.set_status("is waiting for the model to load...")

    def _chat_path(self) -> str:
        """The chat file's path (relative to the server root), or '' when it has none."""
        try:
            return str(self.chat.get_path())
        except (ValueError, AttributeError):
            return ""

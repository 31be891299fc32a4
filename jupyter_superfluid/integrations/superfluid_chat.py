"""One chat of another tool as one conversation of this server, over its HTTP API only.

``ChatConversations`` finds or creates the conversation of a chat (keyed by the chat's
stable id, kept in the conversation's ``metadata``) and streams each message's answer
as ``POST /v1/responses`` with ``conversation`` and ``stream: true``, yielding the
``response.output_text.delta`` texts. What goes wrong (the server unreachable, a model
still loading past the wait, an unknown model, a failed generation) is raised as
``ChatError`` with a short message meant for the chat. Nothing here imports the server.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import httpx

CHAT_ID_KEY = "jupyter_ai_chat_id"  # the chat's stable id: the key its conversation is found by
CHAT_PATH_KEY = "jupyter_ai_chat"  # the chat file's path, for people reading the listing
METADATA_VALUE_MAX = 512  # the Conversations API's limit on one metadata value
LOADING_RETRY_MAX_S = 10.0
EMPTY_ANSWER = "_(The model gave an empty answer.)_"  # what a chat shows for no answer


class ChatError(Exception):
    """Something the chat should say, briefly, instead of an answer."""


@dataclass(frozen=True)
class ServerAddress:
    """Where this server answers: its root URL (base path included, ending in ``/``), token."""

    root: str
    token: str = ""

    def headers(self) -> dict[str, str]:
        """The request headers: Jupyter's ``Authorization: token …`` when there is a token."""
        return {"Authorization": f"token {self.token}"} if self.token else {}


def server_app_of(component: Any) -> Any | None:
    """The Jupyter ``ServerApp`` a configurable runs under: up its parents, else the singleton."""
    node = component
    while node is not None:
        app = getattr(node, "serverapp", None)
        if app is not None:
            return app
        node = getattr(node, "parent", None)
    try:
        from jupyter_server.serverapp import ServerApp
    except ImportError:  # pragma: no cover - jupyter_server is a dependency
        return None
    return ServerApp.instance() if ServerApp.initialized() else None


def find_server(component: Any, url: str = "", token: str = "") -> ServerAddress:
    """The server to ask: ``url``/``token`` when given, else the Jupyter server's own."""
    app = None if url and token else server_app_of(component)
    if not url:
        if app is None:
            raise ChatError("No Jupyter server found to ask (set SuperfluidPersona.server_url).")
        url = str(app.connection_url)
    if not token and app is not None:
        token = str(getattr(getattr(app, "identity_provider", None), "token", "") or "")
    return ServerAddress(url.rstrip("/") + "/", token)


def _clip(text: str) -> str:
    """A metadata value within the API's limit."""
    return text[:METADATA_VALUE_MAX]


def _error_message(response: httpx.Response) -> tuple[str, str]:
    """The error code and message of an error answer (or its status line)."""
    try:
        error = response.json().get("error") or {}
    except (ValueError, AttributeError):
        error = {}
    code = str(error.get("code") or "")
    message = str(error.get("message") or f"HTTP {response.status_code}")
    return code, message


def _retry_after(response: httpx.Response) -> float:
    """The wait ``Retry-After`` asks for, within a second and ``LOADING_RETRY_MAX_S``."""
    try:
        wait = float(response.headers.get("Retry-After", "1"))
    except ValueError:
        wait = 1.0
    return min(max(wait, 1.0), LOADING_RETRY_MAX_S)


@dataclass
class Turn:
    """One answer as it went: its response id, the one it continued, and its usage."""

    response_id: str | None = None
    previous_response_id: str | None = None
    usage: dict[str, Any] | None = None


class ChatConversations:
    """The conversations of one tool's chats on one server, and the answers in them."""

    def __init__(self, address: ServerAddress, timeout: float = 600.0) -> None:
        self.address = address
        self.timeout = timeout
        self._known: dict[str, str] = {}  # chat id -> conversation id, this process's memory

    def _client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            base_url=self.address.root,
            headers=self.address.headers(),
            timeout=httpx.Timeout(self.timeout, connect=10.0),
        )

    async def _get(self, path: str, **params: Any) -> dict[str, Any]:
        """A JSON answer to a GET, or ``ChatError``."""
        async with self._client() as client:
            try:
                response = await client.get(path, params=params)
            except httpx.HTTPError as err:
                raise self._unreachable(err) from err
        if response.status_code >= 400:
            raise ChatError(_error_message(response)[1])
        return dict(response.json())

    def _unreachable(self, err: Exception) -> ChatError:
        return ChatError(f"Cannot reach the superfluid server at {self.address.root} ({err}).")

    async def first_model(self) -> str:
        """The first served model (``GET /v1/models``)."""
        data = (await self._get("v1/models")).get("data") or []
        if not data:
            raise ChatError("The superfluid server serves no model.")
        return str(data[0]["id"])

    async def model_ids(self) -> list[str]:
        """Every served model's id."""
        return [str(m["id"]) for m in (await self._get("v1/models")).get("data") or []]

    async def find(self, chat_id: str) -> str | None:
        """The conversation of this chat, if the server holds one (the newest, if several)."""
        if chat_id in self._known:
            return self._known[chat_id]
        listing = await self._get("v1/conversations", q=chat_id, limit=100)
        for conv in listing.get("data") or []:
            if (conv.get("metadata") or {}).get(CHAT_ID_KEY) == chat_id:
                self._known[chat_id] = str(conv["id"])
                return self._known[chat_id]
        return None

    async def create(self, chat_id: str, chat_path: str, title: str) -> str:
        """A new conversation for this chat, titled from its first message."""
        metadata = {"title": _clip(title), CHAT_PATH_KEY: _clip(chat_path), CHAT_ID_KEY: chat_id}
        async with self._client() as client:
            try:
                response = await client.post("v1/conversations", json={"metadata": metadata})
            except httpx.HTTPError as err:
                raise self._unreachable(err) from err
        if response.status_code >= 400:
            raise ChatError(_error_message(response)[1])
        self._known[chat_id] = str(response.json()["id"])
        return self._known[chat_id]

    def forget(self, chat_id: str) -> None:
        """Drop what this process remembers of a chat's conversation (it was deleted)."""
        self._known.pop(chat_id, None)

    async def answer(
        self,
        conversation: str,
        body: dict[str, Any],
        turn: Turn,
        *,
        load_wait: float = 300.0,
        on_wait: Callable[[str], None] | None = None,
    ) -> AsyncIterator[str]:
        """The answer's text as it streams; ``turn`` is filled in as the events come."""
        request = {**body, "conversation": conversation, "stream": True}
        deadline = time.monotonic() + load_wait
        async with self._client() as client:
            while True:
                try:
                    async with client.stream("POST", "v1/responses", json=request) as response:
                        if response.status_code < 400:
                            async for text in _deltas(response, turn):
                                yield text
                            return
                        await response.aread()
                        wait = _loading_wait(response, deadline)
                        if wait is None:
                            raise _failed(response)
                except httpx.HTTPError as err:
                    raise self._unreachable(err) from err
                if on_wait is not None:
                    on_wait(_error_message(response)[1])
                await asyncio.sleep(wait)


class ConversationGone(ChatError):
    """The chat's conversation was deleted on the server."""


def _failed(response: httpx.Response) -> ChatError:
    """The error an answer that did not start stands for."""
    code, message = _error_message(response)
    if code == "conversation_not_found":
        return ConversationGone(message)
    if code == "model_loading":
        return ChatError(f"The model is still loading: {message} Send the message again soon.")
    return ChatError(message)


def _loading_wait(response: httpx.Response, deadline: float) -> float | None:
    """How long to wait before asking again, for a model still loading within the deadline."""
    if response.status_code != 503 or _error_message(response)[0] != "model_loading":
        return None
    wait = _retry_after(response)
    return wait if time.monotonic() + wait < deadline else None


async def _events(response: httpx.Response) -> AsyncIterator[dict[str, Any]]:
    """The JSON events of a Responses stream (``data:`` lines), up to ``[DONE]``."""
    async for line in response.aiter_lines():
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            return
        if data:
            yield json.loads(data)


async def _deltas(response: httpx.Response, turn: Turn) -> AsyncIterator[str]:
    """The output text deltas of a stream; a failed or errored stream raises ``ChatError``."""
    async for event in _events(response):
        kind = event.get("type")
        if kind == "response.output_text.delta" and event.get("delta"):
            yield str(event["delta"])
        elif kind in ("response.created", "response.completed", "response.incomplete"):
            body = event.get("response") or {}
            turn.response_id = body.get("id") or turn.response_id
            turn.previous_response_id = body.get("previous_response_id")
            turn.usage = body.get("usage") or turn.usage
        elif kind in ("response.failed", "error"):
            error = event.get("error") or (event.get("response") or {}).get("error") or {}
            raise ChatError(str(error.get("message") or "The answer failed."))

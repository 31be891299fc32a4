"""Thin Tornado handlers of ``/v1/conversations…``."""

from __future__ import annotations

from typing import Any

from jupyter_superfluid.openai_api.conversations import Conversations
from jupyter_superfluid.openai_api.handlers import OpenAIHandler
from jupyter_superfluid.web.base import Access, Route


class ConversationsBase(OpenAIHandler):
    """Reading needs responses:read; creating, updating and deleting responses:write."""

    scope = {"GET": "responses:read", "POST": "responses:write", "DELETE": "responses:write"}

    def initialize(self, access: Access, conversations: Conversations) -> None:
        """Receive the Conversations service."""
        self.access, self.conversations = access, conversations

    def query(self) -> dict[str, Any]:
        """The query string as a dict (validated by the service)."""
        return {k: self.get_query_argument(k) for k in self.request.query_arguments}


class ConversationsHandler(ConversationsBase):
    """``POST /v1/conversations`` (create) and ``GET`` (this server's listing)."""

    async def post(self) -> None:
        """Create a conversation."""
        self.write_json(await self.conversations.create(self.json_body(), self.principal))

    async def get(self) -> None:
        """This principal's conversations, most recently active first."""
        self.write_json(await self.conversations.listing(self.principal, self.query()))


class ConversationHandler(ConversationsBase):
    """``GET``, ``POST`` (update) and ``DELETE /v1/conversations/{id}``."""

    async def get(self, conversation_id: str) -> None:
        """One conversation."""
        self.write_json(await self.conversations.retrieve(conversation_id, self.principal))

    async def post(self, conversation_id: str) -> None:
        """Replace its metadata."""
        body = self.json_body()
        self.write_json(await self.conversations.update(conversation_id, body, self.principal))

    async def delete(self, conversation_id: str) -> None:
        """Delete it, purging its responses."""
        self.write_json(await self.conversations.delete(conversation_id, self.principal))


class ConversationResponsesHandler(ConversationsBase):
    """``GET /v1/conversations/{id}/responses`` (this server's extension): its branch tree."""

    async def get(self, conversation_id: str) -> None:
        """Every response of the conversation, oldest first."""
        self.write_json(await self.conversations.responses(conversation_id, self.principal))


class ItemsHandler(ConversationsBase):
    """``GET`` and ``POST /v1/conversations/{id}/items``."""

    async def get(self, conversation_id: str) -> None:
        """Its items, paginated."""
        query = self.query()
        self.write_json(await self.conversations.items(conversation_id, self.principal, query))

    async def post(self, conversation_id: str) -> None:
        """Add items."""
        body = self.json_body()
        self.write_json(await self.conversations.add_items(conversation_id, body, self.principal))


class ItemHandler(ConversationsBase):
    """``GET`` and ``DELETE /v1/conversations/{id}/items/{item_id}``."""

    async def get(self, conversation_id: str, item_id: str) -> None:
        """One item."""
        self.write_json(await self.conversations.item(conversation_id, item_id, self.principal))

    async def delete(self, conversation_id: str, item_id: str) -> None:
        """Remove one item; the conversation."""
        found = await self.conversations.delete_item(conversation_id, item_id, self.principal)
        self.write_json(found)


def routes(*, conversations: Conversations) -> list[Route]:
    """The Conversations URL table (relative to the server's base URL)."""
    cid, iid = r"(?P<conversation_id>[^/]+)", r"(?P<item_id>[^/]+)"
    deps = {"conversations": conversations}
    return [
        (r"/v1/conversations", ConversationsHandler, deps),
        (rf"/v1/conversations/{cid}", ConversationHandler, deps),
        (rf"/v1/conversations/{cid}/responses", ConversationResponsesHandler, deps),
        (rf"/v1/conversations/{cid}/items", ItemsHandler, deps),
        (rf"/v1/conversations/{cid}/items/{iid}", ItemHandler, deps),
    ]

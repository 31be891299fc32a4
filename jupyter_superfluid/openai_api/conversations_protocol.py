"""Request shapes of the Conversations API (``/v1/conversations…``), typed at the edge.

Items are the Responses API's own input items (``generation.wire``), so a conversation
holds exactly what a response could be sent. The listing of conversations and its
search are this server's extension (the chat panel lists its chats with them).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from jupyter_superfluid.generation.wire import InputItems, Wire
from jupyter_superfluid.openai_api.protocol import ListQuery, Metadata

ConversationId = Annotated[str, Field(min_length=1, max_length=256)]


class ConversationCreateRequest(Wire):
    """``POST /v1/conversations``."""

    items: Annotated[InputItems, Field(max_length=20)] | None = None
    metadata: Metadata | None = None


class ConversationUpdateRequest(Wire):
    """``POST /v1/conversations/{id}``: new metadata (replacing the old), or another branch.

    ``head_response_id`` is this server's extension: it moves the conversation to the
    branch ending at that response (one of the conversation's own).
    """

    metadata: Metadata | None = None
    head_response_id: ConversationId | None = None


class ItemsCreateRequest(Wire):
    """``POST /v1/conversations/{id}/items``."""

    items: Annotated[InputItems, Field(min_length=1, max_length=20)]


class ConversationRef(Wire):
    """``conversation: {"id": "conv_…"}`` on a response."""

    id: ConversationId


class ConversationListQuery(ListQuery):
    """The listing's query: ``limit``, ``order``, ``after``, and ``q`` searching titles."""

    q: str | None = Field(default=None, max_length=256)


class ItemsListQuery(ListQuery):
    """An item listing's query (``include`` is accepted and has nothing to add here)."""

    include: Any = None
    order: Literal["asc", "desc"] = "desc"

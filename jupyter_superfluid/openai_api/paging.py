"""One way to page items by id (``order``, ``after``, ``limit``), in OpenAI's list shape."""

from __future__ import annotations

from typing import Any

from jupyter_superfluid.errors import InvalidRequest
from jupyter_superfluid.openai_api.protocol import ListQuery


def list_body(data: list[dict[str, Any]], has_more: bool) -> dict[str, Any]:
    """OpenAI's list object around ``data``."""
    return {
        "object": "list",
        "data": data,
        "first_id": data[0]["id"] if data else None,
        "last_id": data[-1]["id"] if data else None,
        "has_more": has_more,
    }


def item_page(items: list[dict[str, Any]], q: ListQuery) -> dict[str, Any]:
    """A page of ``items`` (oldest first) in ``q.order`` after ``q.after``, as a list object."""
    items = list(reversed(items)) if q.order == "desc" else list(items)
    if q.after is not None:
        ids = [i.get("id") for i in items]
        if q.after not in ids:
            raise InvalidRequest(f"after: no item '{q.after}'", param="after")
        items = items[ids.index(q.after) + 1 :]
    page = items[: q.limit]
    return list_body(page, len(items) > len(page))

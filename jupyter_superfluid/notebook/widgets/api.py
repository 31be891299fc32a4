"""The HTTP the conversation tree needs, and the pure functions that shape its answers.

The tree asks the server (found by ``notebook.client``) for the listing
(``GET /v1/responses``, every page), one response and its input items, and deletes.
``conversation`` picks, from the flat listing, the records connected to one response
through ``previous_response_id`` (hidden parents included), which is the tree drawn.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from jupyter_superfluid.notebook.client import Endpoint
from jupyter_superfluid.notebook.widgets.state import item_from_output, usage_from

LISTING_FIELDS = ("id", "created_at", "model", "status", "previous_response_id", "cached_tokens")
PAGE = 100
MAX_RECORDS = 5000


class Api:
    """Blocking HTTP calls to one superfluid server."""

    def __init__(self, endpoint: Endpoint, timeout: float = 30.0) -> None:
        import httpx

        self.endpoint = endpoint
        headers = {"Authorization": f"Bearer {endpoint.api_key}"}
        # trust_env=False: a proxy configured for the internet must not see loopback calls.
        self.http = httpx.Client(
            base_url=endpoint.base_url, headers=headers, timeout=timeout, trust_env=False
        )

    def _get(self, path: str, **params: Any) -> Any:
        response = self.http.get(path, params={k: v for k, v in params.items() if v is not None})
        response.raise_for_status()
        return response.json()

    def listing(self) -> list[dict[str, Any]]:
        """Every stored response this key may see (newest first), page after page."""
        records: list[dict[str, Any]] = []
        after = None
        while len(records) < MAX_RECORDS:
            page = self._get("/responses", limit=PAGE, after=after)
            records += page.get("data") or []
            if not page.get("has_more") or not page.get("last_id"):
                break
            after = page["last_id"]
        return records

    def retrieve(self, response_id: str) -> dict[str, Any]:
        """One stored response."""
        return dict(self._get(f"/responses/{response_id}"))

    def input_items(self, response_id: str) -> list[dict[str, Any]]:
        """A response's input items, oldest first."""
        items: list[dict[str, Any]] = []
        after = None
        while True:
            page = self._get(
                f"/responses/{response_id}/input_items", order="asc", limit=100, after=after
            )
            items += page.get("data") or []
            if not page.get("has_more") or not page.get("last_id"):
                return items
            after = page["last_id"]

    def delete(self, response_id: str) -> None:
        """Delete a stored response."""
        self.http.delete(f"/responses/{response_id}").raise_for_status()

    def close(self) -> None:
        """Close the connection pool."""
        self.http.close()


def node_of(record: Mapping[str, Any]) -> dict[str, Any]:
    """A listing record as a tree node of the front-end contract."""
    node = {key: record.get(key) for key in LISTING_FIELDS}
    node["created_at"] = int(record.get("created_at") or 0)
    node["cached_tokens"] = int(record.get("cached_tokens") or 0)
    node["preview"] = str(record.get("preview") or "")
    return node


def conversation(records: Iterable[Mapping[str, Any]], anchor: str | None) -> list[dict[str, Any]]:
    """The nodes connected to ``anchor`` (all nodes when ``anchor`` is None or unknown)."""
    nodes = [node_of(r) for r in records]
    if not anchor:
        return nodes
    links: dict[str, set[str]] = defaultdict(set)
    for node in nodes:
        parent = node["previous_response_id"]
        if parent:
            links[node["id"]].add(parent)
            links[parent].add(node["id"])
    if anchor not in links and anchor not in {n["id"] for n in nodes}:
        return []
    seen, todo = {anchor}, [anchor]
    while todo:
        for other in links[todo.pop()] - seen:
            seen.add(other)
            todo.append(other)
    return [n for n in nodes if n["id"] in seen]


def input_detail(item: Mapping[str, Any]) -> dict[str, str]:
    """An input item reduced to what people read: type, role and text."""
    kind = str(item.get("type") or "message")
    if kind == "message":
        content = item.get("content")
        if isinstance(content, str):
            text = content
        else:
            text = "".join(str(p.get("text", "")) for p in content or [] if "text" in p)
        return {"type": kind, "role": str(item.get("role") or "user"), "text": text}
    if kind == "function_call_output":
        return {"type": kind, "role": "tool", "text": str(item.get("output", ""))}
    if kind == "function_call":
        call = f"{item.get('name')}({item.get('arguments', '')})"
        return {"type": kind, "role": "assistant", "text": call}
    found = item_from_output(item)
    return {"type": kind, "role": kind, "text": str((found or {}).get("text", ""))}


def node_detail(response: Mapping[str, Any], inputs: list[dict[str, Any]]) -> dict[str, Any]:
    """What the tree shows of a selected response (``NodeDetail`` in the contract)."""
    output = [item_from_output(o) for o in response.get("output") or []]
    return {
        "id": str(response.get("id", "")),
        "model": str(response.get("model", "")),
        "status": str(response.get("status", "")),
        "input": [input_detail(i) for i in inputs],
        "output": [o for o in output if o is not None],
        "usage": usage_from(response),
    }

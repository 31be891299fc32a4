"""The one neutral form of a stored response, and the Responses-style output item shape.

Every protocol that stores responses renders them from ``StoredResponse``:
neutral facts (status, usage, the Responses-style output items every protocol's
items are a subset of), plus the creating request's echoed parameters in its
own protocol's words. ``stored_response`` reads any record back, older records
(which hold a protocol's own body) included.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from jupyter_superfluid.chat.types import OutputItem, Usage
from jupyter_superfluid.store import ResponseRecord

_ID_PREFIX = {"reasoning": "rs", "message": "msg", "function_call": "fc"}
BODY_SCHEMA = 2  # stored bodies in the neutral form below; older ones are protocol bodies


def item_id(response_id: str, kind: str, index: int) -> str:
    """The id of a response's output item: ``msg_…_0``, ``rs_…_1``, ``fc_…_2``."""
    return f"{_ID_PREFIX[kind]}_{response_id.removeprefix('resp_')}_{index}"


def call_id(response_id: str, index: int, given: str | None = None) -> str:
    """A function call's id: the parser's, else ``call_…_index``."""
    return given or f"call_{response_id.removeprefix('resp_')}_{index}"


def output_item(response_id: str, index: int, out: OutputItem) -> dict[str, Any]:
    """A finished output item in the Responses shape every protocol renders from."""
    status = "completed" if out.complete else "incomplete"
    iid = item_id(response_id, out.kind, index)
    if out.kind == "function_call":
        item: dict[str, Any] = {
            "id": iid,
            "type": "function_call",
            "call_id": call_id(response_id, index, out.call_id),
            "name": out.name or "",
            "arguments": out.text,
            "status": status,
        }
        if out.namespace:
            item["namespace"] = out.namespace
        return item
    if out.kind == "reasoning":
        return {
            "id": iid,
            "type": "reasoning",
            "summary": [],
            "content": [{"type": "reasoning_text", "text": out.text}],
            "status": status,
        }
    return {
        "id": iid,
        "type": "message",
        "role": "assistant",
        "status": status,
        "content": [{"type": "output_text", "text": out.text, "annotations": [], "logprobs": []}],
    }


def canonical_item(item: Mapping[str, Any]) -> dict[str, Any]:
    """A stored output item of either protocol (LMSP's are a subset) in the Responses shape."""
    kind = item.get("type")
    status = item.get("status", "completed")
    parts = item.get("content") or item.get("summary") or []
    text = "".join(p.get("text", "") for p in parts if isinstance(p, dict))
    if kind == "message":
        return {
            "id": item.get("id"),
            "type": "message",
            "role": "assistant",
            "status": status,
            "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}],
        }
    if kind == "reasoning":
        return {
            "id": item.get("id"),
            "type": "reasoning",
            "summary": [],
            "content": [{"type": "reasoning_text", "text": text}],
            "status": status,
        }
    return {**item, "status": status}


@dataclass(frozen=True)
class StoredResponse:
    """A response as every protocol renders it: neutral facts plus the request's echo."""

    id: str
    model: str
    status: str  # in_progress, completed, incomplete, failed or cancelled
    created_at: int
    protocol: str  # which protocol created it ("openai" or "lmsp")
    previous_response_id: str | None = None
    store: bool = True
    completed_at: int | None = None
    output: tuple[dict[str, Any], ...] = ()  # Responses-style output items
    usage: Usage | None = None
    incomplete_reason: str | None = None
    error: Mapping[str, Any] | None = None  # failed: {"code" (the engine's, or None), "message"}
    echo: Mapping[str, Any] = field(default_factory=dict)  # in the creating protocol's words
    sampling: Mapping[str, Any] = field(default_factory=dict)  # temperature, top_p used

    def stored_body(self) -> dict[str, Any]:
        """What the store keeps as this response's body."""
        u = self.usage or Usage()
        return {
            "schema": BODY_SCHEMA,
            "status": self.status,
            "completed_at": self.completed_at,
            "incomplete_reason": self.incomplete_reason,
            "error": dict(self.error) if self.error else None,
            "usage": {
                "input_tokens": u.input_tokens,
                "cached_tokens": u.cached_tokens,
                "output_tokens": u.output_tokens,
                "reasoning_tokens": u.reasoning_tokens,
            },
            "echo": dict(self.echo),
            "sampling": dict(self.sampling),
        }


def stored_response(rec: ResponseRecord) -> StoredResponse:
    """The neutral form of a stored record (older records hold a protocol's own body)."""
    body: Mapping[str, Any] = rec.body if isinstance(rec.body, Mapping) else {}
    raw = body.get("usage") or {}
    if body.get("schema") == BODY_SCHEMA:
        usage = Usage(**{k: int(raw.get(k, 0)) for k in Usage.__dataclass_fields__})
        echo, sampling = body.get("echo") or {}, body.get("sampling") or {}
        completed_at, reason = body.get("completed_at"), body.get("incomplete_reason")
    else:
        details = raw.get("output_tokens_details") or {}
        usage = Usage(
            int(raw.get("input_tokens", 0)),
            rec.cached_tokens,
            int(raw.get("output_tokens", 0)),
            int(details.get("reasoning_tokens", 0)),
        )
        echo = body if rec.protocol == "openai" else {}
        sampling = {k: body[k] for k in ("temperature", "top_p") if body.get(k) is not None}
        completed_at = None
        reason = (body.get("incomplete_details") or {}).get("reason")
    return StoredResponse(
        id=rec.id,
        model=rec.model,
        status=rec.status,
        created_at=int(rec.created_at),
        protocol=rec.protocol,
        previous_response_id=rec.previous_response_id,
        completed_at=completed_at,
        output=tuple(canonical_item(i) for i in rec.output_items),
        usage=usage,
        incomplete_reason=reason,
        echo=echo,
        sampling=sampling,
    )

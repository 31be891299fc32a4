"""Pure serializers: neutral chat events → LMSP output items and stream events (6.3).

``LmspEncoder`` knows nothing of HTTP or storage: stored turns
hands it each neutral event and it returns the LMSP events that event implies,
each ``(id, name, data)`` with ``data`` carrying ``response_id`` and exactly the
fields of the spec's table; ids are integers from 1, strictly increasing. It
keeps every event it made (for tasks and idempotent replays). Tool calls are
sent complete in ``response.output_item.done`` (no argument deltas).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jupyter_superfluid.chat.types import ChatEvent, ItemDone, ItemStarted, TextDelta, Usage
from jupyter_superfluid.errors import APIError, generation_error
from jupyter_superfluid.generation.stored import StoredResponse, call_id, item_id, output_item
from jupyter_superfluid.lmsp.problems import problem

Stamped = tuple[int | None, str, dict[str, Any]]  # (SSE id, event name, data)
FINAL_EVENTS = frozenset(
    {"response.completed", "response.incomplete", "response.failed", "response.cancelled"}
)
# Reasoning text streams as an additional event (6.3 lets services add events).
REASONING_DELTA = "response.reasoning_summary_text.delta"


def usage_object(usage: Usage | None) -> dict[str, int]:
    """``usage`` as LMSP shows it: input, output and total tokens."""
    u = usage or Usage()
    return {
        "input_tokens": u.input_tokens,
        "output_tokens": u.output_tokens,
        "total_tokens": u.total_tokens,
    }


def lmsp_item(item: Mapping[str, Any]) -> dict[str, Any]:
    """A Responses-style output item in LMSP's shape (6.2's item table)."""
    kind = item.get("type")
    if kind == "function_call":
        keys = ("id", "type", "call_id", "name", "arguments")
        return {k: item.get(k) for k in keys}
    parts = item.get("summary") or item.get("content") or []
    text = "".join(p.get("text", "") for p in parts if isinstance(p, dict))
    if kind == "reasoning":
        summary = [{"type": "summary_text", "text": text}]
        return {"id": item.get("id"), "type": "reasoning", "summary": summary}
    return {
        "id": item.get("id"),
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text}],
    }


def response_error(resp: StoredResponse) -> dict[str, Any] | None:
    """The problem object of a failed response."""
    if not resp.error:
        return None
    return problem(generation_error(resp.error.get("message"), resp.error.get("code")))


def response_object(resp: StoredResponse) -> dict[str, Any]:
    """The response object of 6.2, from the neutral stored form (either protocol's)."""
    reason = resp.incomplete_reason
    return {
        "id": resp.id,
        "object": "response",
        "created_at": resp.created_at,
        "status": resp.status,
        "model": resp.model,
        "output": [lmsp_item(i) for i in resp.output],
        "usage": usage_object(resp.usage),
        "error": response_error(resp),
        "incomplete_details": {"reason": reason} if reason else None,
    }


class LmspEncoder:
    """The numbered stream events of one response."""

    def __init__(self, response_id: str) -> None:
        self.response_id = response_id
        self.ids: dict[int, str] = {}
        self.events: list[Stamped] = []
        self.last = 0  # the id of the last event made

    def _stamp(self, *events: tuple[str, dict[str, Any]]) -> list[Stamped]:
        out: list[Stamped] = []
        for name, data in events:
            self.last += 1
            stamped = (self.last, name, {"response_id": self.response_id, **data})
            self.events.append(stamped)
            out.append(stamped)
        return out

    def opened(self, pending: StoredResponse) -> list[Stamped]:
        """``response.created``."""
        return self._stamp(("response.created", {"status": "in_progress"}))

    def on(self, event: ChatEvent) -> list[Stamped]:
        """The stream events one neutral item event implies."""
        if isinstance(event, ItemStarted):
            return self._stamp(self._started(event))
        if isinstance(event, TextDelta):
            if not event.text or event.index not in self.ids or event.kind == "function_call":
                return []  # a tool call arrives complete in output_item.done
            name = "response.output_text.delta" if event.kind == "message" else REASONING_DELTA
            return self._stamp((name, {"item_id": self.ids[event.index], "delta": event.text}))
        if isinstance(event, ItemDone):
            item = lmsp_item(output_item(self.response_id, event.index, event.item))
            data = {"output_index": event.index, "item": item}
            return self._stamp(("response.output_item.done", data))
        return []

    def closed(self, response: StoredResponse) -> list[Stamped]:
        """The final event of a finished generation (6.3's table)."""
        data: dict[str, Any] = {"status": response.status}
        if response.status in ("completed", "incomplete"):
            if response.incomplete_reason:
                data["incomplete_details"] = {"reason": response.incomplete_reason}
            data["usage"] = usage_object(response.usage)
        elif response.status == "failed":
            data["error"] = response_error(response)
        return self._stamp((f"response.{response.status}", data))

    def error(self, err: APIError) -> list[Stamped]:
        """The ``error`` event of a stream that cannot go on."""
        self.last += 1
        event: Stamped = (self.last, "error", {"error": problem(err)})
        self.events.append(event)
        return [event]

    def _started(self, ev: ItemStarted) -> tuple[str, dict[str, Any]]:
        iid = self.ids[ev.index] = item_id(self.response_id, ev.kind, ev.index)
        item: dict[str, Any]
        if ev.kind == "function_call":
            item = {
                "id": iid,
                "type": "function_call",
                "call_id": call_id(self.response_id, ev.index, ev.call_id),
                "name": ev.name or "",
                "arguments": "",
            }
        elif ev.kind == "reasoning":
            item = {"id": iid, "type": "reasoning", "summary": []}
        else:
            item = {"id": iid, "type": "message", "role": "assistant", "content": []}
        return "response.output_item.added", {"output_index": ev.index, "item": item}

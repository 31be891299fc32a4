"""Pure serializers: neutral chat events → LMSP output items and stream events (6.3).

``LmspAssembler`` knows nothing of HTTP or storage: it turns each neutral event
into the LMSP events it implies, each a ``(name, data)`` pair whose data
carries ``response_id`` and exactly the fields of the spec's table, and keeps
the output items as they grow. Tool calls are sent complete in
``response.output_item.done`` (no argument deltas). ``Numbering`` gives the
SSE ``id``s: integers from 1, strictly increasing within a response.
"""

from __future__ import annotations

from typing import Any

from ..chat.types import ChatEvent, Finished, ItemDone, ItemStarted, OutputItem, TextDelta, Usage

Event = tuple[str, dict[str, Any]]
FINAL_EVENTS = frozenset(
    {"response.completed", "response.incomplete", "response.failed", "response.cancelled"}
)
# Reasoning text streams as an additional event (6.3 lets services add events).
REASONING_DELTA = "response.reasoning_summary_text.delta"
_PREFIX = {"reasoning": "rs", "message": "msg", "function_call": "fc"}


def usage_object(usage: Usage) -> dict[str, int]:
    """``usage`` as LMSP shows it: input, output and total tokens."""
    return {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "total_tokens": usage.total_tokens,
    }


def final_item(item_id: str, out: OutputItem, call_id: str | None = None) -> dict[str, Any]:
    """A finished output item in LMSP's shape (6.2's item table)."""
    if out.kind == "function_call":
        return {
            "id": item_id,
            "type": "function_call",
            "call_id": call_id or out.call_id or item_id.replace("fc_", "call_", 1),
            "name": out.name or "",
            "arguments": out.text,
        }
    if out.kind == "reasoning":
        return {
            "id": item_id,
            "type": "reasoning",
            "summary": [{"type": "summary_text", "text": out.text}],
        }
    return {
        "id": item_id,
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": out.text}],
    }


class LmspAssembler:
    """Builds one response's output items and its stream events."""

    def __init__(self, response_id: str) -> None:
        self.response_id = response_id
        self.hex = response_id.removeprefix("resp_")
        self.items: dict[int, dict[str, Any]] = {}

    def output(self) -> list[dict[str, Any]]:
        """The output items so far, in order."""
        return [self.items[i] for i in sorted(self.items)]

    def created(self) -> Event:
        """``response.created``."""
        return "response.created", {"response_id": self.response_id, "status": "in_progress"}

    def on(self, event: ChatEvent) -> list[Event]:
        """The stream events one neutral event implies."""
        if isinstance(event, ItemStarted):
            return [self._started(event)]
        if isinstance(event, TextDelta):
            return self._delta(event)
        if isinstance(event, ItemDone):
            return [self._done(event)]
        return []

    def _item_id(self, kind: str, index: int) -> str:
        return f"{_PREFIX[kind]}_{self.hex}_{index}"

    def _started(self, ev: ItemStarted) -> Event:
        item_id = self._item_id(ev.kind, ev.index)
        item: dict[str, Any]
        if ev.kind == "function_call":
            item = {
                "id": item_id,
                "type": "function_call",
                "call_id": ev.call_id or f"call_{self.hex}_{ev.index}",
                "name": ev.name or "",
                "arguments": "",
            }
        elif ev.kind == "reasoning":
            item = {"id": item_id, "type": "reasoning", "summary": []}
        else:
            item = {"id": item_id, "type": "message", "role": "assistant", "content": []}
        self.items[ev.index] = item
        return self._item_event("response.output_item.added", ev.index, item)

    def _delta(self, ev: TextDelta) -> list[Event]:
        item = self.items.get(ev.index)
        if not ev.text or item is None or ev.kind == "function_call":
            return []  # a tool call arrives complete in output_item.done
        name = "response.output_text.delta" if ev.kind == "message" else REASONING_DELTA
        return [(name, {"response_id": self.response_id, "item_id": item["id"], "delta": ev.text})]

    def _done(self, ev: ItemDone) -> Event:
        started = self.items.get(ev.index)
        item_id = started["id"] if started else self._item_id(ev.item.kind, ev.index)
        call_id = started.get("call_id") if started else None
        item = final_item(item_id, ev.item, call_id)
        self.items[ev.index] = item
        return self._item_event("response.output_item.done", ev.index, item)

    def _item_event(self, name: str, index: int, item: dict[str, Any]) -> Event:
        data = {"response_id": self.response_id, "output_index": index, "item": _copy(item)}
        return name, data

    def final(self, fin: Finished, error: dict[str, Any] | None = None) -> Event:
        """The final event of a finished generation (6.3's table)."""
        data: dict[str, Any] = {"response_id": self.response_id, "status": fin.status}
        if fin.status in ("completed", "incomplete"):
            if fin.status == "incomplete":
                data["incomplete_details"] = {"reason": fin.reason or "max_output_tokens"}
            data["usage"] = usage_object(fin.usage)
        elif fin.status == "failed":
            data["error"] = error
        return f"response.{fin.status}", data


def _copy(item: dict[str, Any]) -> dict[str, Any]:
    # Events are kept (tasks, idempotent replays): never share a list that grows later.
    return {k: (list(v) if isinstance(v, list) else v) for k, v in item.items()}


class Numbering:
    """Stamps SSE ids on events: integers from 1, strictly increasing."""

    def __init__(self) -> None:
        self.last = 0

    def stamp(self, event: Event) -> tuple[int, str, dict[str, Any]]:
        """``event`` with its id."""
        self.last += 1
        return self.last, event[0], event[1]

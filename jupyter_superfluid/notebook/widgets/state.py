"""What a response view shows, folded from Responses stream events (pure, no widgets).

``ResponseState.apply(event)`` takes the event dicts the ``%%respond`` renderer
interface delivers (OpenAI Responses stream events, one ``response.completed`` per
round without streaming, and ``superfluid.tool_output`` between rounds of a tool
loop) and keeps the items, status and usage in the shape of the front-end contract
(``labextension/src/contract.ts``). Items of every round of a tool loop accumulate.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

FINAL = {"response.completed", "response.incomplete"}
TEXT_DELTAS = {"response.output_text.delta": "text", "response.reasoning_text.delta": "text"}


def item_from_output(item: Mapping[str, Any], status: str | None = None) -> dict[str, Any] | None:
    """A contract item from a Responses output item; None for kinds not shown."""
    kind = item.get("type")
    state = status or str(item.get("status") or "completed")
    if kind == "message":
        text = "".join(
            str(p.get("text", ""))
            for p in item.get("content") or []
            if p.get("type") == "output_text"
        )
        return {"type": "message", "id": str(item.get("id", "")), "text": text, "status": state}
    if kind == "reasoning":
        parts = item.get("content") or item.get("summary") or []
        text = "".join(str(p.get("text", "")) for p in parts)
        return {"type": "reasoning", "id": str(item.get("id", "")), "text": text, "status": state}
    if kind == "function_call":
        return {
            "type": "function_call",
            "id": str(item.get("id", "")),
            "call_id": str(item.get("call_id", "")),
            "name": str(item.get("name", "")),
            "namespace": item.get("namespace"),
            "arguments": str(item.get("arguments") or ""),
            "output": None,
            "status": state,
        }
    return None


def usage_from(response: Mapping[str, Any], seconds: float | None = None) -> dict[str, Any] | None:
    """The contract usage of a response; tokens per second over ``seconds`` of streaming."""
    usage = response.get("usage")
    if not usage:
        return None
    output = int(usage.get("output_tokens") or 0)
    speed = output / seconds if seconds and seconds > 0 and output > 1 else None
    return {
        "input_tokens": int(usage.get("input_tokens") or 0),
        "cached_tokens": int((usage.get("input_tokens_details") or {}).get("cached_tokens") or 0),
        "output_tokens": output,
        "reasoning_tokens": int(
            (usage.get("output_tokens_details") or {}).get("reasoning_tokens") or 0
        ),
        "tokens_per_second": round(speed, 1) if speed is not None else None,
    }


@dataclass
class ResponseState:
    """The items, status and usage of one cell's response(s), updated event by event."""

    clock: Callable[[], float] = time.monotonic
    response_id: str = ""
    model: str = ""
    status: str = "idle"
    items: list[dict[str, Any]] = field(default_factory=list)
    usage: dict[str, Any] | None = None
    error: str = ""
    waiting: dict[str, Any] | None = None  # the model's state while it is not ready yet
    _round: dict[int, int] = field(default_factory=dict)  # output_index -> position in items
    _first_delta: float | None = None

    def apply(self, event: Mapping[str, Any]) -> bool:
        """Fold one event in; True when it changed what is shown."""
        kind = str(event.get("type", ""))
        if kind in TEXT_DELTAS or kind == "response.function_call_arguments.delta":
            return self._delta(event, kind)
        handler = _HANDLERS.get(kind)
        return handler(self, event) if handler else False

    def _delta(self, event: Mapping[str, Any], kind: str) -> bool:
        """Append a text, reasoning or arguments delta to its item."""
        item = self._item(event)
        delta = str(event.get("delta", ""))
        if item is None or not delta:
            return False
        if self._first_delta is None:
            self._first_delta = self.clock()
        key = "arguments" if item["type"] == "function_call" else "text"
        item[key] += delta
        return True

    def _item(self, event: Mapping[str, Any]) -> dict[str, Any] | None:
        """The item an event is about: by item id, else by its output index in this round."""
        item_id = event.get("item_id")
        if item_id:
            for item in reversed(self.items):
                if item["id"] == item_id:
                    return item
        position = self._round.get(int(event.get("output_index", -1)))
        return self.items[position] if position is not None else None

    def _waiting(self, event: Mapping[str, Any]) -> bool:
        """The cell's model is downloading or loading: keep its latest state."""
        model = event.get("model")
        self.waiting = dict(model) if isinstance(model, Mapping) else None
        return True

    def _created(self, event: Mapping[str, Any]) -> bool:
        self.waiting = None
        response = event.get("response") or {}
        self.response_id = str(response.get("id", ""))
        self.model = str(response.get("model") or self.model)
        self.status = "in_progress"
        self._round = {}
        self._first_delta = None
        return True

    def _added(self, event: Mapping[str, Any]) -> bool:
        item = item_from_output(event.get("item") or {}, "in_progress")
        if item is None:
            return False
        self._round[int(event.get("output_index", len(self._round)))] = len(self.items)
        self.items.append(item)
        return True

    def _item_done(self, event: Mapping[str, Any]) -> bool:
        done = item_from_output(event.get("item") or {})
        current = self._item({**event, "item_id": (event.get("item") or {}).get("id")})
        if done is None or current is None:
            return False
        if "output" in current:  # a function call keeps the output its tool gave
            done["output"] = current["output"]
        current.update(done)
        return True

    def _final(self, event: Mapping[str, Any]) -> bool:
        response = event.get("response") or {}
        if event.get("streamed") is False:  # a round that did not stream: take it whole
            self._created(event)
            for index, out in enumerate(response.get("output") or []):
                self._added({"item": out, "output_index": index})
                self._item_done({"item": out, "output_index": index})
        seconds = self.clock() - self._first_delta if self._first_delta is not None else None
        self.status = str(response.get("status") or "completed")
        self.usage = usage_from(response, seconds)
        return True

    def _failed(self, event: Mapping[str, Any]) -> bool:
        error = event.get("error") or (event.get("response") or {}).get("error") or {}
        self.status = "failed"
        self.error = str(error.get("message") or event.get("message") or "generation failed")
        return True

    def _tool_output(self, event: Mapping[str, Any]) -> bool:
        for item in reversed(self.items):
            if item["type"] == "function_call" and item["call_id"] == event.get("call_id"):
                item["output"] = str(event.get("output", ""))
                return True
        return False

    def _text_done(self, event: Mapping[str, Any]) -> bool:
        item = self._item(event)
        text = event.get("text")
        if item is None or text is None or item.get("text") == text:
            return False
        item["text"] = str(text)
        return True

    def cancel(self, message: str) -> None:
        """The stream was closed before the end: nothing was stored."""
        self.waiting = None
        self.status = "cancelled"
        self.error = message
        for item in self.items:
            if item["status"] == "in_progress":
                item["status"] = "incomplete"

    def fail(self, message: str) -> None:
        """The cell failed with a readable message."""
        self.waiting = None
        self.status = "failed"
        self.error = message


_HANDLERS: dict[str, Callable[[ResponseState, Mapping[str, Any]], bool]] = {
    "response.created": ResponseState._created,
    "response.output_item.added": ResponseState._added,
    "response.output_item.done": ResponseState._item_done,
    "response.output_text.done": ResponseState._text_done,
    "response.reasoning_text.done": ResponseState._text_done,
    "response.failed": ResponseState._failed,
    "error": ResponseState._failed,
    "superfluid.tool_output": ResponseState._tool_output,
    "superfluid.model_waiting": ResponseState._waiting,
    **{kind: ResponseState._final for kind in FINAL},
}

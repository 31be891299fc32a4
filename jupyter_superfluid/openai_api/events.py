"""Pure serializers: neutral chat events → Responses output items and stream events.

``OutputAssembler`` knows nothing of HTTP or storage: it turns each neutral
event into the OpenAI stream events it implies (unnumbered) and keeps the
output items as they grow. ``Sequencer`` stamps ``sequence_number`` from 0.
"""

from __future__ import annotations

from typing import Any

from ..chat.types import ChatEvent, ItemDone, ItemStarted, OutputItem, TextDelta

PART_TYPE = {"reasoning": "reasoning_text", "message": "output_text"}


def text_part(kind: str, text: str) -> dict[str, Any]:
    """The content part of a reasoning or message item."""
    if kind == "reasoning":
        return {"type": "reasoning_text", "text": text}
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


class OutputAssembler:
    """Builds output items and their stream events for one response."""

    def __init__(self, response_id: str) -> None:
        self.hex = response_id.removeprefix("resp_")
        self.items: dict[int, dict[str, Any]] = {}
        self.texts: dict[int, str] = {}

    def output(self) -> list[dict[str, Any]]:
        """The output items so far, in order."""
        return [self.items[i] for i in sorted(self.items)]

    def on(self, event: ChatEvent) -> list[dict[str, Any]]:
        """The stream events ``event`` implies."""
        if isinstance(event, ItemStarted):
            return self._started(event)
        if isinstance(event, TextDelta):
            return self._delta(event)
        if isinstance(event, ItemDone):
            return self._done(event.index, event.item)
        return []

    def _item_id(self, kind: str, index: int) -> str:
        prefix = {"reasoning": "rs", "message": "msg", "function_call": "fc"}[kind]
        return f"{prefix}_{self.hex}_{index}"

    def _started(self, ev: ItemStarted) -> list[dict[str, Any]]:
        i = ev.index
        item_id = self._item_id(ev.kind, i)
        self.texts[i] = ""
        if ev.kind == "function_call":
            item: dict[str, Any] = {
                "id": item_id,
                "type": "function_call",
                "call_id": f"call_{self.hex}_{i}",
                "name": ev.name or "",
                "arguments": "",
                "status": "in_progress",
            }
            if ev.namespace:
                item["namespace"] = ev.namespace
            self.items[i] = item
            return [{"type": "response.output_item.added", "output_index": i, "item": dict(item)}]
        if ev.kind == "reasoning":
            item = {
                "id": item_id,
                "type": "reasoning",
                "summary": [],
                "content": [],
                "status": "in_progress",
            }
        else:
            item = {
                "id": item_id,
                "type": "message",
                "role": "assistant",
                "status": "in_progress",
                "content": [],
            }
        self.items[i] = item
        return [
            {"type": "response.output_item.added", "output_index": i, "item": _copy(item)},
            {
                "type": "response.content_part.added",
                "item_id": item_id,
                "output_index": i,
                "content_index": 0,
                "part": text_part(ev.kind, ""),
            },
        ]

    def _delta(self, ev: TextDelta) -> list[dict[str, Any]]:
        if not ev.text or ev.index not in self.items:
            return []
        self.texts[ev.index] += ev.text
        base = {"item_id": self.items[ev.index]["id"], "output_index": ev.index, "delta": ev.text}
        if ev.kind == "function_call":
            return [{"type": "response.function_call_arguments.delta", **base}]
        if ev.kind == "reasoning":
            return [{"type": "response.reasoning_text.delta", **base, "content_index": 0}]
        return [{"type": "response.output_text.delta", **base, "content_index": 0, "logprobs": []}]

    def _done(self, i: int, out: OutputItem) -> list[dict[str, Any]]:
        item = self.items[i]
        status = "completed" if out.complete else "incomplete"
        base = {"item_id": item["id"], "output_index": i}
        events: list[dict[str, Any]] = []
        if out.kind == "function_call":
            item.update(arguments=out.text, status=status, name=out.name or item["name"])
            events.append(
                {
                    "type": "response.function_call_arguments.done",
                    **base,
                    "name": item["name"],
                    "arguments": out.text,
                }
            )
        else:
            part = text_part(out.kind, out.text)
            item.update(content=[part], status=status)
            done_type = (
                "response.reasoning_text.done"
                if out.kind == "reasoning"
                else "response.output_text.done"
            )
            done: dict[str, Any] = {"type": done_type, **base, "content_index": 0, "text": out.text}
            if out.kind == "message":
                done["logprobs"] = []
            events += [
                done,
                {
                    "type": "response.content_part.done",
                    **base,
                    "content_index": 0,
                    "part": dict(part),
                },
            ]
        events.append({"type": "response.output_item.done", "output_index": i, "item": _copy(item)})
        return events


def _copy(item: dict[str, Any]) -> dict[str, Any]:
    return {k: (list(v) if isinstance(v, list) else v) for k, v in item.items()}


class Sequencer:
    """Stamps ``sequence_number`` on each event, counting from 0."""

    def __init__(self) -> None:
        self.next = 0

    def stamp(self, event: dict[str, Any]) -> dict[str, Any]:
        """``event`` with its sequence number."""
        event["sequence_number"] = self.next
        self.next += 1
        return event

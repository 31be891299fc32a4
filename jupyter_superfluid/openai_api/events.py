"""Pure serializers: neutral chat events → Responses stream events.

``ResponsesEncoder`` knows nothing of HTTP or storage: the stored-turn
``StoredTurns`` hands it each neutral event and it returns the OpenAI stream events
that event implies, numbered with ``sequence_number`` from 0. Items finish in
the one Responses shape the store keeps (``stored.output_item``), so a
streamed item equals the stored one.

Reasoning text streams as OpenAI names it, ``response.reasoning_text.delta`` and
``.done``, unless the request carries an ``OpenResponses-Version`` header (any
value): then as OpenResponses names it, ``response.reasoning.delta`` and
``.done`` (same fields). OpenAI's names stay the default because the openai SDK
(checked with 2.x/3.x) parses ``response.reasoning.delta`` as a
``ResponseAudioDeltaEvent``, so a client matching the reasoning event's type
or class would see no reasoning; the openai-agents SDK takes either. Every
stream ends with ``data: [DONE]`` (``DONE``), as OpenResponses requires and
the openai SDK accepts.
"""

from __future__ import annotations

from typing import Any

from jupyter_superfluid.chat.types import ChatEvent, ItemDone, ItemStarted, TextDelta
from jupyter_superfluid.generation.stored import StoredResponse, call_id, item_id, output_item
from jupyter_superfluid.openai_api.stored import response_body
from jupyter_superfluid.web.sse import SSE

Event = dict[str, Any]
OPENRESPONSES_HEADER = "OpenResponses-Version"
DONE = SSE("[DONE]")  # the last line of every Responses stream


def text_part(kind: str, text: str) -> dict[str, Any]:
    """The content part of a reasoning or message item."""
    if kind == "reasoning":
        return {"type": "reasoning_text", "text": text}
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


class ResponsesEncoder:
    """The stream events of one response, numbered from 0."""

    def __init__(self, response_id: str, *, openresponses: bool = False) -> None:
        self.response_id = response_id
        self.ids: dict[int, str] = {}
        self.next = 0
        # The reasoning events' middle name: OpenResponses' when asked for, else OpenAI's.
        self.reasoning = "reasoning" if openresponses else "reasoning_text"

    def _numbered(self, events: list[Event]) -> list[Event]:
        for event in events:
            event["sequence_number"] = self.next
            self.next += 1
        return events

    def opened(self, pending: StoredResponse) -> list[Event]:
        """``response.created`` and ``response.in_progress``."""
        start = response_body(pending)
        return self._numbered(
            [
                {"type": "response.created", "response": start},
                {"type": "response.in_progress", "response": response_body(pending)},
            ]
        )

    def on(self, event: ChatEvent) -> list[Event]:
        """The stream events one neutral item event implies."""
        if isinstance(event, ItemStarted):
            return self._numbered(self._started(event))
        if isinstance(event, TextDelta):
            return self._numbered(self._delta(event))
        if isinstance(event, ItemDone):
            return self._numbered(self._done(event))
        return []

    def closed(self, response: StoredResponse) -> list[Event]:
        """The final events: ``response.completed``/``incomplete``, or ``error`` + ``failed``."""
        body = response_body(response)
        if response.status == "failed":
            error = body["error"]
            failed = {"type": "response.failed", "response": body}
            return self.error(error["code"], error["message"]) + self._numbered([failed])
        if response.status == "cancelled":
            return []
        return self._numbered([{"type": f"response.{response.status}", "response": body}])

    def error(
        self, code: str, message: str, param: str | None = None, kind: str = "server_error"
    ) -> list[Event]:
        """The ``error`` event of a stream that cannot go on: OpenAI's fields at the top,
        OpenResponses' ``error`` payload beside them."""
        payload = {"type": kind, "code": code, "message": message, "param": param}
        fields = {"code": code, "message": message, "param": param}
        return self._numbered([{"type": "error", **fields, "error": payload}])

    def _started(self, ev: ItemStarted) -> list[Event]:
        i = ev.index
        iid = self.ids[i] = item_id(self.response_id, ev.kind, i)
        if ev.kind == "function_call":
            item: dict[str, Any] = {
                "id": iid,
                "type": "function_call",
                "call_id": call_id(self.response_id, i, ev.call_id),
                "name": ev.name or "",
                "arguments": "",
                "status": "in_progress",
            }
            if ev.namespace:
                item["namespace"] = ev.namespace
            return [{"type": "response.output_item.added", "output_index": i, "item": item}]
        if ev.kind == "reasoning":
            item = {"id": iid, "type": "reasoning", "summary": [], "content": []}
        else:
            item = {"id": iid, "type": "message", "role": "assistant", "content": []}
        item["status"] = "in_progress"
        return [
            {"type": "response.output_item.added", "output_index": i, "item": item},
            {
                "type": "response.content_part.added",
                "item_id": iid,
                "output_index": i,
                "content_index": 0,
                "part": text_part(ev.kind, ""),
            },
        ]

    def _delta(self, ev: TextDelta) -> list[Event]:
        if not ev.text or ev.index not in self.ids:
            return []
        base = {"item_id": self.ids[ev.index], "output_index": ev.index, "delta": ev.text}
        if ev.kind == "function_call":
            return [{"type": "response.function_call_arguments.delta", **base}]
        if ev.kind == "reasoning":
            return [{"type": f"response.{self.reasoning}.delta", **base, "content_index": 0}]
        return [{"type": "response.output_text.delta", **base, "content_index": 0, "logprobs": []}]

    def _done(self, ev: ItemDone) -> list[Event]:
        i, out = ev.index, ev.item
        item = output_item(self.response_id, i, out)
        base = {"item_id": item["id"], "output_index": i}
        events: list[Event] = []
        if out.kind == "function_call":
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
            kind = self.reasoning if out.kind == "reasoning" else "output_text"
            done: Event = {"type": f"response.{kind}.done", **base, "content_index": 0}
            done["text"] = out.text
            if out.kind == "message":
                done["logprobs"] = []
            events += [
                done,
                {"type": "response.content_part.done", **base, "content_index": 0, "part": part},
            ]
        events.append({"type": "response.output_item.done", "output_index": i, "item": item})
        return events

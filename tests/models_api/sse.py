"""Reading the models event stream in tests: an SSE parser over httpx, and waits on it."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx


@dataclass
class Event:
    """One server-sent event."""

    id: int | None
    event: str
    data: dict[str, Any]


class EventStream:
    """A live ``/superfluid/v1/models/events`` connection."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self._lines = response.iter_lines()
        self.seen: list[Event] = []

    def next(self) -> Event:
        """The next event (keepalives included)."""
        fields: dict[str, str] = {}
        for line in self._lines:
            if not line:
                if fields:
                    break
                continue
            name, _, value = line.partition(": ")
            fields[name] = value
        else:
            raise EOFError("the event stream ended")
        event = Event(
            int(fields["id"]) if "id" in fields else None,
            fields.get("event", "message"),
            json.loads(fields["data"]),
        )
        self.seen.append(event)
        return event

    def until(self, check: Callable[[Event], bool], limit: int = 10_000) -> Event:
        """Read events until one passes ``check``; that one."""
        for _ in range(limit):
            event = self.next()
            if check(event):
                return event
        raise AssertionError(f"no such event in {limit}")

    def until_state(self, model_id: str, *states: str) -> Event:
        """Read events until ``model_id`` is in one of ``states``."""
        return self.until(
            lambda e: (
                e.event.startswith("model.")
                and e.data["model"]["id"] == model_id
                and e.data["model"]["state"] in states
            )
        )


@contextmanager
def events(
    base: str, headers: dict[str, str] | None = None, **params: Any
) -> Iterator[EventStream]:
    """Follow the models event stream of the server at ``base`` (its root URL)."""
    with (
        httpx.Client(timeout=httpx.Timeout(120, connect=10)) as http,
        http.stream(
            "GET", f"{base}/superfluid/v1/models/events", headers=headers or {}, params=params
        ) as response,
    ):
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        yield EventStream(response)

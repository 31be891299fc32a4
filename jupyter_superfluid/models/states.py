"""Where each served model is, and the numbered log of its changes (pure: no I/O).

A model's state is one of ``STATES``::

    not_downloaded ──► downloading ──► available ──► loading ──► loaded ──► unloaded
          ▲                 │               ▲            │                      │
          └── (cancelled) ──┤               └────────────┼──────────────────────┘
                            ▼                            ▼
                          failed ◄───────────────────────┘   (any attempt may fail;
                                                              trying again starts over)

``not_downloaded`` is a model whose files are on the hub but not (all) on this disk:
the default Qwen3 model before its first use, or a download that was stopped (its
partial file stays, and ``progress`` says how far it got). ``available`` is on disk,
not loaded; ``unloaded`` is the same after an unload.

``EventLog`` numbers every change (``model.added``, ``model.state``,
``model.progress``, ``model.removed``), each carrying the model's whole state after it,
so a client that replaces its copy with each event's is always right. It keeps the
last ``retention`` events for followers that resume with ``Last-Event-ID``.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Literal

from jupyter_superfluid.models.downloads import size_text

State = Literal[
    "not_downloaded", "downloading", "available", "loading", "loaded", "failed", "unloaded"
]
STATES: tuple[State, ...] = (
    "not_downloaded",
    "downloading",
    "available",
    "loading",
    "loaded",
    "failed",
    "unloaded",
)
Origin = Literal["config", "added"]
EventType = Literal["model.added", "model.state", "model.progress", "model.removed"]
EVENT_TYPES: tuple[EventType, ...] = (
    "model.added",
    "model.state",
    "model.progress",
    "model.removed",
)
RETRY_AFTER_LOADING_S = 1
RETRY_AFTER_DOWNLOADING_S = 5


@dataclass(frozen=True)
class Progress:
    """Bytes fetched of a model's missing files, and the recent rate."""

    done: int
    total: int | None = None
    rate: float | None = None  # bytes per second
    file: str = ""

    @property
    def fraction(self) -> float | None:
        """Done over total (0..1), when the total is known."""
        if not self.total:
            return None
        return min(1.0, self.done / self.total)

    def as_dict(self) -> dict[str, Any]:
        """The wire shape (``/v1/models`` ``superfluid.progress``, events, LMSP)."""
        return {
            "done_bytes": self.done,
            "total_bytes": self.total,
            "bytes_per_second": None if self.rate is None else round(self.rate),
            "fraction": None if self.fraction is None else round(self.fraction, 4),
            "file": self.file,
            "text": describe_progress(self),  # the one wording every client shows
        }


@dataclass(frozen=True)
class ModelState:
    """One served model's state, as every surface reports it."""

    id: str
    spec: str
    kind: str  # "path", "hf", "builtin"
    state: State
    origin: Origin = "config"
    progress: Progress | None = None
    error: str | None = None
    error_code: str | None = None  # model_unavailable (files), model_load_failed (load)
    since: float = field(default_factory=time.time)

    def as_dict(self) -> dict[str, Any]:
        """The wire shape of a model's state."""
        return {
            "id": self.id,
            "state": self.state,
            "spec": self.spec,
            "kind": self.kind,
            "origin": self.origin,
            "progress": None if self.progress is None else self.progress.as_dict(),
            "error": self.error,
            "since": round(self.since, 3),
        }

    @property
    def retry_after(self) -> int:
        """Seconds a client should wait before asking again for this model."""
        return RETRY_AFTER_DOWNLOADING_S if self.state == "downloading" else RETRY_AFTER_LOADING_S

    def describe(self) -> str:
        """Where the model is, for people (the message of a 503 ``model_loading``)."""
        if self.state == "downloading" and self.progress is not None:
            return f"model {self.id!r} is downloading: {describe_progress(self.progress)}"
        if self.state in ("not_downloaded", "downloading"):
            return f"model {self.id!r} is downloading"
        if self.state == "failed":
            return f"model {self.id!r} failed: {self.error}"
        return f"model {self.id!r} is {self.state.replace('_', ' ')}"


def describe_progress(progress: Progress) -> str:
    """``42% (1.2 MB of 2.9 MB, 350.0 KB/s, about 5 s left)``."""
    parts = [size_text(progress.done)]
    if progress.total:
        parts[0] += f" of {size_text(progress.total)}"
    if progress.rate:
        parts.append(f"{size_text(int(progress.rate))}/s")
        if progress.total:
            left = max(0.0, (progress.total - progress.done) / progress.rate)
            parts.append(f"about {round(left)} s left")
    head = f"{progress.fraction:.0%} " if progress.fraction is not None else ""
    return f"{head}({', '.join(parts)})"


@dataclass(frozen=True)
class ModelEvent:
    """One numbered change: its type and the model's whole state after it."""

    id: int
    type: EventType
    model: dict[str, Any]
    created_at: float

    def as_dict(self) -> dict[str, Any]:
        """The SSE data of the event."""
        return {
            "id": self.id,
            "type": self.type,
            "model": self.model,
            "created_at": round(self.created_at, 3),
        }


class EventLog:
    """Numbered model events, the last ``retention`` kept; followers await new ones.

    Ids count up from ``start + 1``. A server starts its log at its start time in
    milliseconds, so ids grow across restarts too, and an id from an earlier server
    is told apart (``after`` answers None, as for events no longer kept). Used from
    the event loop's thread only (download threads hand their progress over with
    ``call_soon_threadsafe``).
    """

    def __init__(self, retention: int = 2000, *, start: int = 0) -> None:
        self.retention = retention
        self.start = start
        self.last_id = start
        self.closed = False
        self._events: deque[ModelEvent] = deque(maxlen=retention)
        self._wake: asyncio.Event | None = None

    def append(self, type: EventType, model: ModelState) -> ModelEvent:
        """Log one change and wake the followers."""
        self.last_id += 1
        event = ModelEvent(self.last_id, type, model.as_dict(), time.time())
        self._events.append(event)
        self._notify()
        return event

    def after(self, last_seen: int) -> list[ModelEvent] | None:
        """The events after ``last_seen``; None when some are not kept or the id is not ours."""
        if last_seen == self.last_id:
            return []
        first = self._events[0].id if self._events else self.last_id + 1
        if last_seen > self.last_id or last_seen < self.start or last_seen + 1 < first:
            return None
        return [e for e in self._events if e.id > last_seen]

    def kept(self) -> list[ModelEvent]:
        """Every event still kept, oldest first."""
        return list(self._events)

    async def wait(self, last_seen: int, timeout: float) -> bool:
        """Wait up to ``timeout`` s for an event after ``last_seen``; whether one came."""
        if self.last_id > last_seen or self.closed:
            return True
        if self._wake is None:
            self._wake = asyncio.Event()
        wake = self._wake
        try:
            await asyncio.wait_for(wake.wait(), timeout)
        except asyncio.TimeoutError:  # not the builtin TimeoutError before Python 3.11
            return False
        return True

    def close(self) -> None:
        """No more events: wake every follower so that it can finish."""
        self.closed = True
        self._notify()

    def _notify(self) -> None:
        wake, self._wake = self._wake, None
        if wake is not None:
            wake.set()

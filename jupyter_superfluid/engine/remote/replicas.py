"""One replica of a pool: its engine, health, retry schedule and counters (no I/O).

A replica is ``up`` (served to), ``down`` (it failed: unreachable, 5xx, lost
mid-stream) or ``refused`` (it serves another model than the pool's). A replica that
is not up is tried again after a backoff that doubles with each failure in a row,
from ``RETRY_BASE_S`` up to ``RETRY_CAP_S``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from jupyter_superfluid.engine.base import Engine, ModelInfo

RETRY_BASE_S = 1.0
RETRY_CAP_S = 30.0
Health = Literal["up", "down", "refused"]
Connector = Callable[[], Engine]  # connects one replica's engine (blocking)

# What every replica of one model id must share: prompts and stored sessions hold
# token ids, so any replica must read them as the same tokens, rendered the same way.
IDENTITY_FIELDS = (
    "n_vocab",
    "bos_token",
    "eos_token",
    "eog_token_ids",
    "chat_template",
    "fim_tokens",
)


def backoff(failures: int, base: float = RETRY_BASE_S, cap: float = RETRY_CAP_S) -> float:
    """Seconds before the next try after ``failures`` failures in a row (doubling, capped)."""
    return min(cap, base * 2 ** max(0, failures - 1))


def identity_difference(reference: ModelInfo, other: ModelInfo) -> str | None:
    """Which identity field of ``other`` differs from ``reference`` (None: the same model)."""
    for name in IDENTITY_FIELDS:
        if getattr(reference, name) != getattr(other, name):
            return name.replace("_", " ")
    return None


@dataclass
class Replica:
    """One replica engine of a pool and what the pool knows of it."""

    url: str
    connector: Connector = field(repr=False)
    engine: Engine | None = field(default=None, repr=False)
    health: Health = "down"
    last_error: str | None = None
    failures: int = 0  # in a row; 0 once it serves again
    retry_at: float | None = None  # time.monotonic() of the next try, when not up
    in_flight: int = 0  # generations running on it now
    served: int = 0  # generations it started
    since: float = field(default_factory=time.time)  # when its health last changed

    @property
    def up(self) -> bool:
        """Whether requests may go to it."""
        return self.health == "up" and self.engine is not None

    def set_up(self, engine: Engine) -> None:
        """It serves (again), through ``engine``."""
        self.engine, self.failures, self.retry_at = engine, 0, None
        if self.health != "up":
            self.health, self.since = "up", time.time()

    def set_failed(self, error: str, health: Health = "down", *, cap: float = RETRY_CAP_S) -> None:
        """It failed (or was refused): the next try after a backoff."""
        self.failures += 1
        self.last_error = error
        self.retry_at = time.monotonic() + backoff(self.failures, cap=cap)
        if self.health != health:
            self.health, self.since = health, time.time()

    def due(self, now: float) -> bool:
        """Whether it is not up and its next try is due at ``now`` (monotonic)."""
        return self.health != "up" and self.retry_at is not None and self.retry_at <= now

    def as_dict(self, pinned: int) -> dict[str, Any]:
        """Its wire shape (``/v1/models`` ``superfluid.replicas``, the models API)."""
        retry = None if self.retry_at is None else max(0.0, self.retry_at - time.monotonic())
        return {
            "url": self.url,
            "health": self.health,
            "since": round(self.since, 3),
            "last_error": self.last_error,
            "failures": self.failures,
            "next_retry_in_s": None if retry is None else round(retry, 2),
            "next_retry_at": None if retry is None else round(time.time() + retry, 3),
            "in_flight": self.in_flight,
            "conversations": pinned,
            "served": self.served,
        }

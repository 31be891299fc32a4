"""The stall watchdog: an engine process that is alive but makes no progress is ended.

A process that dies is seen by its exit (``spawn.py``); one that is stopped
(SIGSTOP), deadlocked inside llama.cpp or spinning in a GGML loop is not: its
generations would wait forever. While generations are in flight, the engine
process sends a heartbeat ``("hb", steps)`` from a thread of its own, every
second (a quarter of the timeout if that is less), with the number of steps its
worker has finished (``child.py``). The server's watchdog looks as often, and
calls the process stalled when, for ``Watch.timeout`` seconds,

- nothing at all came from it (frozen: a stopped process, or a hang that holds
  the GIL, so that its heartbeat thread cannot run), or
- frames came but none showed a step (wedged: the worker is stuck in one call,
  while the rest of the process lives).

One worker step is the unit of progress, so a long but live step (a prompt
chunk of a large model on a slow CPU) is a stall only when it alone lasts the
whole timeout; that is what the timeout must exceed. The watchdog costs nothing
per token: the server counts frames (one increment per step's frame) and looks
once a period; the engine process counts steps.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable
from dataclasses import dataclass

STALL_TIMEOUT_S = 300.0
HEARTBEAT_S = 1.0
CALL_TIMEOUT_S = 600.0  # a blocking call's limit when the watchdog is off


@dataclass(frozen=True)
class Watch:
    """How an engine process is watched: its stall timeout (0: not watched), how often."""

    timeout: float = STALL_TIMEOUT_S
    heartbeat: float | None = None  # seconds between heartbeats; None: from the timeout

    @property
    def enabled(self) -> bool:
        """Whether stalls are watched for."""
        return self.timeout > 0

    @property
    def period(self) -> float:
        """Seconds between the server's looks (0: none)."""
        return min(HEARTBEAT_S, self.timeout / 4) if self.enabled else 0.0

    @property
    def beat(self) -> float:
        """Seconds between the engine process's heartbeats (0: none)."""
        if self.enabled and self.heartbeat is not None:
            return self.heartbeat
        return self.period

    @property
    def call_timeout(self) -> float:
        """How long a blocking call (tokenize, ...) waits for its answer."""
        return self.timeout if self.enabled else CALL_TIMEOUT_S


DEFAULT_WATCH = Watch()

# What the server saw of a process: frames received so far, and a token of its
# progress (changes whenever a frame shows a step).
Sample = tuple[int, Hashable]


class StallClock:
    """Decides from successive samples when a process stopped making progress."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self._frames = 0
        self._progress: Hashable = None
        self._heard_at = self._moved_at = 0.0

    def restart(self, now: float, sample: Sample) -> None:
        """Start watching at ``now`` (generations began after a quiet time)."""
        self._frames, self._progress = sample
        self._heard_at = self._moved_at = now

    def verdict(self, now: float, sample: Sample) -> str | None:
        """Why the process is stalled at ``now``, or None while it makes progress."""
        frames, progress = sample
        if frames != self._frames:
            self._frames, self._heard_at = frames, now
        if progress != self._progress:
            self._progress, self._moved_at = progress, now
        silent, still = now - self._heard_at, now - self._moved_at
        if silent >= self.timeout:
            return f"stopped making progress for {still:.1f} s (it sent nothing: stopped or frozen)"
        if still >= self.timeout:
            return (
                f"stopped making progress for {still:.1f} s "
                "(it was alive, but its worker did not finish a step)"
            )
        return None


class Watchdog:
    """Looks at one process every period while it has generations in flight.

    ``sample()`` is what the process sent so far, or None when nothing is in
    flight (the watchdog then rests until ``arm``); ``on_stall(why)`` is called
    once, when the process stalled.
    """

    def __init__(
        self,
        watch: Watch,
        sample: Callable[[], Sample | None],
        on_stall: Callable[[str], None],
    ) -> None:
        self.watch = watch
        self._sample = sample
        self._on_stall = on_stall
        self._clock = StallClock(watch.timeout)
        self._timer: asyncio.TimerHandle | None = None

    def arm(self) -> None:
        """A generation started: watch from now on, unless already watching (event loop)."""
        if not self.watch.enabled or self._timer is not None:
            return
        sample = self._sample()
        if sample is None:
            return
        loop = asyncio.get_running_loop()
        self._clock.restart(loop.time(), sample)
        self._timer = loop.call_later(self.watch.period, self._look)

    def disarm(self) -> None:
        """Stop watching (the process exited)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _look(self) -> None:
        self._timer = None
        sample = self._sample()
        if sample is None:
            return  # nothing in flight: rest until the next generation
        loop = asyncio.get_running_loop()
        why = self._clock.verdict(loop.time(), sample)
        if why is not None:
            self._on_stall(why)
            return
        self._timer = loop.call_later(self.watch.period, self._look)

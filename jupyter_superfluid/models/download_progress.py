"""A download's progress: bytes so far, the recent rate, told at most so often.

Bytes that arrive within ``interval_s`` of a report are told by a ticker thread a little
later, and a stalled download still reports every few seconds (its rate falls), so the
notebook's progress bar shows where a download stopped.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

RATE_WINDOW_S = 3.0
HEARTBEAT_S = 2.0  # a stalled download still reports (its rate falls) this often


@dataclass(frozen=True)
class DownloadProgress:
    """Bytes fetched so far of all a model's missing files, and the recent rate."""

    done: int
    total: int | None  # None while some file's size is unknown
    rate: float | None  # bytes per second over the last few seconds; None at first
    file: str  # the file being fetched now


ProgressSink = Callable[[DownloadProgress], None]


class ProgressMeter:
    """Counts a download's bytes and tells ``on_progress`` (in order, never too often)."""

    def __init__(self, on_progress: ProgressSink | None, interval_s: float) -> None:
        self.on_progress = on_progress
        self.interval_s = interval_s  # the most often progress is reported
        self.done = 0
        self.total: int | None = None
        self.file = ""
        self._samples: deque[tuple[float, int]] = deque()
        self._last_report = 0.0
        self._pending = False
        self._lock = threading.Lock()

    def report(self, *, force: bool = False) -> None:
        """Note new bytes; tell ``on_progress`` now if ``force`` or ``interval_s`` has passed.

        Bytes that arrive within ``interval_s`` of a report are told by the ticker
        thread a little later, so a download that stalls still shows where it stopped.
        """
        with self._lock:
            self._pending = True
            due = time.monotonic() - self._last_report >= self.interval_s
        if force or due:
            self.emit()

    def tick(self, stop: threading.Event) -> None:
        """Tell pending progress once ``interval_s`` has passed, and the rate every few seconds."""
        while not stop.wait(max(self.interval_s / 2, 0.02)):
            with self._lock:
                since = time.monotonic() - self._last_report
                pending = self._pending
            if (pending and since >= self.interval_s) or since >= HEARTBEAT_S:
                self.emit()

    def emit(self) -> None:
        """Tell ``on_progress`` the bytes so far and the rate over the last few seconds."""
        if self.on_progress is None:
            return
        with self._lock:
            now = time.monotonic()
            self._samples.append((now, self.done))
            while now - self._samples[0][0] > RATE_WINDOW_S:
                self._samples.popleft()
            first_t, first_done = self._samples[0]
            rate = (self.done - first_done) / (now - first_t) if now - first_t > 0.05 else None
            progress = DownloadProgress(self.done, self.total, rate, self.file)
            self._pending = False
            self._last_report = now
            self.on_progress(progress)  # under the lock: reports stay in order


def size_text(n: float | None) -> str:
    """Bytes for people (decimal units, as the hub shows sizes)."""
    if n is None:
        return "an unknown size"
    value = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{int(n)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{int(n)} B"

"""A model's download or load as text: one line per state, progress every few seconds.

Where widgets cannot show (a terminal, nbclient, an editor without the extension),
``%respond pull`` and a ``%%respond`` cell waiting for its model print these lines.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping
from typing import Any, TextIO

PRINT_EVERY_S = 2.0


def progress_line(state: Mapping[str, Any]) -> str:
    """``Qwen3-0.6B-Q4_K_M: downloading 42% (1.2 MB of 2.9 MB, 350.0 KB/s)``."""
    name, where = state.get("id", "?"), str(state.get("state", "?")).replace("_", " ")
    line = f"{name}: {where}"
    progress = state.get("progress")
    if state.get("state") in ("downloading", "not_downloaded") and progress:
        line += f" {progress.get('text') or ''}".rstrip()  # the server's own wording
    if state.get("state") == "failed" and state.get("error"):
        line += f": {state['error']}"
    return line


class TextProgress:
    """Prints a model's progress: each new state, each tenth of a download, and every few s."""

    def __init__(self, out: TextIO | None = None, every_s: float = PRINT_EVERY_S) -> None:
        self.out = out
        self.every_s = every_s
        self._last: tuple[str, int] | None = None  # (state, tenths of the download)
        self._last_print = 0.0

    def update(self, state: Mapping[str, Any]) -> None:
        """Take a model's latest state; print it if it moved on, or a while has passed."""
        now = time.monotonic()
        fraction = (state.get("progress") or {}).get("fraction")
        # Tenths of the percentage shown, so that the line printed says the step it is for.
        tenths = -1 if fraction is None else round(fraction * 100) // 10
        mark = (str(state.get("state")), tenths)
        if mark == self._last and now - self._last_print < self.every_s:
            return
        self._last, self._last_print = mark, now
        out = self.out or sys.stdout
        out.write(progress_line(state) + "\n")
        out.flush()

"""How an engine process's end is told: its exit status and the log lines worth quoting."""

from __future__ import annotations

import signal

LOG_LINES_QUOTED = 8


def exit_status(code: int) -> str:
    """A process's exit ``code`` (negative: the signal that killed it) in words."""
    if code >= 0:
        return f"exited with code {code}"
    try:
        return f"was killed by {signal.Signals(-code).name}"
    except ValueError:
        return f"was killed by signal {-code}"


def quoted_lines(lines: list[str]) -> list[str]:
    """The lines worth quoting from a log's tail: its last lines, or a fatal error's."""
    fatal = next((i for i, line in enumerate(lines) if line.startswith("Fatal Python error")), None)
    if fatal is None:
        picked = lines[-LOG_LINES_QUOTED:]
    else:
        # faulthandler's report: before it, the engine's own last lines; then the
        # error and the frames of the thread that hit it (the other threads' stacks
        # say little).
        before = lines[max(0, fatal - 3) : fatal]
        current = next(
            (i for i in range(fatal, len(lines)) if lines[i].startswith(_STACK_HEADS)), None
        )
        frames = lines[current : current + 4] if current is not None else []
        picked = [*before, lines[fatal], *frames]
    return [line.strip()[:300] for line in picked]


_STACK_HEADS = ("Stack (", "Current thread", "Thread 0x")

"""Finding and watching engine processes from tests (through /proc, Linux)."""

from __future__ import annotations

import os
import time
from pathlib import Path

CHILD_MODULE = "jupyter_superfluid.engine.process.child"


def is_running(pid: int) -> bool:
    """Whether ``pid`` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def is_stopped(pid: int) -> bool:
    """Whether every thread of ``pid`` is stopped (SIGSTOP takes effect a moment after kill)."""
    try:
        states = [
            (task / "stat").read_text().rsplit(")", 1)[1].split()[0]
            for task in Path(f"/proc/{pid}/task").iterdir()
        ]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return bool(states) and all(state == "T" for state in states)


def parent_of(pid: int) -> int:
    """The parent pid of ``pid``."""
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def engine_children(parent: int | None = None) -> list[int]:
    """Running engine processes whose parent is ``parent`` (this process by default)."""
    parent = os.getpid() if parent is None else parent
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            pid = int(entry.name)
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
            if CHILD_MODULE.encode() in cmdline and parent_of(pid) == parent and is_running(pid):
                found.append(pid)
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue
    return found


def wait_until(predicate, what: str, timeout: float = 60.0) -> None:  # type: ignore[no-untyped-def]
    """Poll ``predicate`` until it holds; fail naming ``what`` if it never does."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"never happened: {what}")
        time.sleep(0.02)

"""Peak resident memory of every server a scenario runs, per process: the server itself
and its children (superfluid's engine process, vLLM's engine core), beside the baselines'.

Servers register when they start (``servers._launch``, and the vLLM scenario for its own
vLLM); while a scenario runs, a thread reads each live one's process tree every quarter
second. A server started more than once in a scenario (a fresh one per repetition)
reports its largest peak.
"""

from __future__ import annotations

import contextlib
import re
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

SAMPLE_S = 0.25


def process_tree(pid: int) -> list[int]:
    """``pid`` and its descendants (the engine runs in a child of the server)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            ppid = int(stat.read_text().rpartition(")")[2].split()[1])
            children.setdefault(ppid, []).append(int(stat.parent.name))
    out, todo = [], [pid]
    while todo:
        current = todo.pop()
        out.append(current)
        todo.extend(children.get(current, ()))
    return out


def rss_bytes(pid: int) -> int:
    """Resident memory of process ``pid`` (VmRSS from /proc), in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


@dataclass
class Watched:
    """A server process whose tree is sampled."""

    label: str
    process: subprocess.Popen[bytes]


_live: list[Watched] = []
_lock = threading.Lock()


def watch(label: str, process: subprocess.Popen[bytes]) -> None:
    """Sample ``process`` (and its children) from now until it exits."""
    with _lock:
        _live.append(Watched(_kind(label), process))


def _kind(label: str) -> str:
    """A server's kind without its instance's details (``llama-server-8`` → llama-server)."""
    return re.sub(r"-\d+$", "", label)


@dataclass
class Peaks:
    """The largest RSS seen, in bytes, per (server kind, process role)."""

    bytes: dict[tuple[str, str], int] = field(default_factory=dict)

    def note(self, key: tuple[str, str], value: int) -> None:
        """Keep ``value`` if it is the largest for ``key`` so far."""
        self.bytes[key] = max(self.bytes.get(key, 0), value)

    def to_json(self) -> dict[str, dict[str, float]]:
        """MiB per server kind and role (``server``, ``children``)."""
        out: dict[str, dict[str, float]] = {}
        for (kind, role), value in sorted(self.bytes.items()):
            out.setdefault(kind, {})[role] = round(value / 2**20, 1)
        return out

    def line(self) -> str:
        """The report's note: each server's peak, its own and its children's."""
        parts = []
        for kind, roles in self.to_json().items():
            text = f"{kind} {roles.get('server', 0):.0f} MiB"
            if roles.get("children"):
                text += f" (+ {roles['children']:.0f} MiB in its {_children_name(kind)})"
            parts.append(text)
        return "Peak RSS: " + "; ".join(parts) + "." if parts else ""


def _children_name(kind: str) -> str:
    if kind.startswith(("superfluid", "jupyter")):
        return "engine process"
    return "child processes"


class Sampler:
    """Samples the live servers' process trees until stopped; the peaks seen meanwhile."""

    def __init__(self, read: Callable[[int], int] = rss_bytes) -> None:
        self.peaks = Peaks()
        self._read = read
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-memory", daemon=True)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while True:
            self.sample()
            if self._stop.wait(SAMPLE_S):
                return

    def sample(self) -> None:
        """One reading of every live server (exited ones are dropped)."""
        with _lock:
            _live[:] = [w for w in _live if w.process.poll() is None]
            live = list(_live)
        for w in live:
            tree = process_tree(w.process.pid)
            own, children = 0, 0
            for pid in tree:
                with contextlib.suppress(OSError, RuntimeError):
                    value = self._read(pid)
                    if pid == w.process.pid:
                        own = value
                    else:
                        children += value
            self.peaks.note((w.label, "server"), own)
            if children:
                self.peaks.note((w.label, "children"), children)

"""A KV sequence ("slot") of the prefix cache, and where a prompt is placed in one."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(eq=False)
class Slot:
    """One KV sequence and the token ids it holds."""

    seq_id: int
    tokens: list[int] = field(default_factory=list)
    busy: bool = False
    last_used: int = 0
    keep: int = 0  # leading tokens worth keeping when the slot is moved out
    retaining: bool = False  # the turn running in it asked to be kept
    persisted: int = 0  # leading tokens a stored (disk) state covers
    idle_since: float = 0.0  # time.monotonic() of its last release (write-behind waits on it)


@dataclass(frozen=True)
class Placement:
    """Where a prompt goes: its slot and how many prompt tokens are already there."""

    slot: Slot
    reused: int
    source: Slot | None  # the slot the prefix was copied from; None when in place
    restored: str = ""  # "ram" or "disk" when the prefix was copied back from that tier

"""Write-behind: which kept states the disk tier does not hold yet, and handing it one.

A retained turn stays in its slot (or in host memory when parked) and is written to disk
once its conversation has been idle for a while, or at close, not after every turn. The
writes themselves run on the disk tier's thread; this decides what goes, and when. A
mixin of ``PrefixCache``, over its slots, host-memory states and store.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from jupyter_superfluid.engine.local.kv.prefix_index import BLOCK

if TYPE_CHECKING:
    from jupyter_superfluid.engine.local.kv.memory_tier import ParkedStates
    from jupyter_superfluid.engine.local.kv.slots import Slot
    from jupyter_superfluid.engine.local.kv.state import KVState, StateStore


class WriteBehind:
    """The prefix cache's side of the disk tier."""

    slots: list[Slot]
    parked: ParkedStates
    store: StateStore | None

    def _save(self, slot: Slot) -> KVState:
        raise NotImplementedError

    def _offer(self, tokens: tuple[int, ...], state: KVState, *, wait: float = 0.0) -> bool:
        raise NotImplementedError

    def _unsaved_slots(self) -> list[Slot]:
        """Idle slots holding a retained turn the disk does not hold, most recent first."""
        return [
            s
            for s in sorted(self.slots, key=lambda s: -s.last_used)
            if not s.busy and len(s.tokens) >= BLOCK and s.keep >= len(s.tokens) > s.persisted
        ]

    def next_flush(self, idle_for: float) -> float | None:
        """When (time.monotonic()) the next kept state will have been idle ``idle_for`` s."""
        if self.store is None:
            return None
        since = [s.idle_since for s in self._unsaved_slots()] + self.parked.unstored_since()
        return min(since) + idle_for if since else None

    def flush_one(self, *, wait: float = 0.0, idle_for: float = 0.0) -> bool:
        """Hand the disk one kept state it does not hold yet; False if none (or refused).

        Idle slots holding a retained turn come first (saved now), then states
        parked in host memory; only those idle for ``idle_for`` seconds
        (write-behind: a conversation going on is written once it pauses).
        ``wait``: seconds to wait for room in the writer's queue (at close)
        rather than give up at once.
        """
        if self.store is None:
            return False
        cutoff = time.monotonic() - idle_for
        for slot in self._unsaved_slots():
            n = len(slot.tokens)
            if slot.idle_since > cutoff:
                continue
            if min(slot.tokens) < 0:  # media placeholders: kept in memory only
                slot.persisted = n
                continue
            tokens = tuple(slot.tokens)
            if self.store.holds(tokens) or self._offer(tokens, self._save(slot), wait=wait):
                slot.persisted = n
                return True
            return False  # the writer is behind: try again when next idle
        parked = self.parked.newest_unstored(before=cutoff)
        if parked is not None and self._offer(*parked, wait=wait):
            self.parked.mark_stored(parked[0])
            return True
        return False

    def unsaved(self) -> int:
        """Kept states the disk does not hold yet (what a crash now would lose)."""
        slots = sum(
            1
            for s in self.slots
            if len(s.tokens) >= BLOCK
            and s.keep >= len(s.tokens) > s.persisted
            and min(s.tokens) >= 0
        )
        return slots + self.parked.unstored

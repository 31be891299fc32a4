"""Restoring: copying a parked or staged KV state back into a slot, and checking it.

A prompt whose longest cached prefix is in host memory (parked) or was read back from
disk by the worker before admission gets it copied into a slot
(``llama_state_seq_set_data``) when that pays against evaluating it, then checked (the
sequence must end at position n-1) before it counts as cached. A mixin of
``PrefixCache``, over its slots, host-memory states, costs and store.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from jupyter_superfluid.engine.local.kv.prefix_index import common_prefix

if TYPE_CHECKING:
    from jupyter_superfluid.engine.local.kv.memory_tier import KVCosts, ParkedStates
    from jupyter_superfluid.engine.local.kv.slots import Placement, Slot
    from jupyter_superfluid.engine.local.kv.state import KVMemory, KVState, Staged, StateStore


class Restoring:
    """The prefix cache's way back from host memory and disk."""

    parked: ParkedStates
    costs: KVCosts
    store: StateStore | None
    streams: bool
    kv_cells: int
    _memory: KVMemory
    restores: int
    disk_restores: int
    restores_invalid: int

    def _free_slot(self, avoid: Slot | None, protect: frozenset[int]) -> Slot:
        raise NotImplementedError

    def _vacate(self, slot: Slot) -> None:
        raise NotImplementedError

    def resident_cells(self) -> int:
        raise NotImplementedError

    def evict_one(self) -> bool:
        raise NotImplementedError

    def _offer(self, tokens: tuple[int, ...], state: KVState, *, wait: float = 0.0) -> bool:
        raise NotImplementedError

    def _claim(self, slot: Slot, reused: int, source: Slot | None, restored: str = "") -> Placement:
        raise NotImplementedError

    def _restore_better(
        self,
        prompt: tuple[int, ...],
        hashes: list[int],
        resident_lcp: int,
        protect: frozenset[int],
        staged: Staged | None,
    ) -> Placement | None:
        """Copy back a parked or staged state when it covers clearly more of ``prompt``."""
        tokens, lcp = self.parked.best_match(prompt, hashes)
        tier = "ram"
        if staged is not None:
            staged_lcp = common_prefix(staged.tokens, prompt)
            if staged.seconds:
                self.costs.note_read(len(staged.tokens), staged.seconds)
            if staged_lcp > lcp:
                tokens, lcp, tier = staged.tokens, staged_lcp, "disk"
        lcp = min(lcp, len(prompt) - 1)
        if not self.costs.restore_pays(lcp - resident_lcp, len(tokens), disk=tier == "disk"):
            return None
        stored = tier == "disk" or self.parked.is_stored(tokens)
        state = self.parked.take(tokens) if tier == "ram" else staged.state  # type: ignore[union-attr]
        assert state is not None
        target = self._free_slot(avoid=None, protect=protect)
        self._vacate(target)
        while not self.streams and self.resident_cells() + len(tokens) > self.kv_cells:
            if not self.evict_one():
                self._put_back(tier, tokens, state, stored)
                return None  # the running sequences leave no room; evaluate instead
        if not self._load(target, tokens, state, tier, stored):
            return None
        target.keep = len(tokens)
        target.persisted = len(tokens) if stored else 0
        return self._claim(target, lcp, None, restored=tier)

    def _load(
        self, slot: Slot, tokens: tuple[int, ...], state: KVState, tier: str, stored: bool
    ) -> bool:
        """Copy ``state`` into ``slot`` and check that it ends at position n-1."""
        started = time.perf_counter()
        if not self._memory.load(slot.seq_id, state):
            self._put_back(tier, tokens, state, stored)
            return False
        low, high = self._memory.span(slot.seq_id)
        if high != len(tokens) - 1 or low < 0:
            # Not the state of these tokens: never serve it; evaluate instead.
            self._memory.remove(slot.seq_id, -1, -1)
            self.restores_invalid += 1
            if tier == "disk" and self.store is not None:
                self.store.reject(tokens)
            return False
        self.costs.note_load(len(tokens), time.perf_counter() - started)
        slot.tokens = list(tokens)
        self.restores += 1
        self.disk_restores += tier == "disk"
        return True

    def _put_back(self, tier: str, tokens: tuple[int, ...], state: KVState, stored: bool) -> None:
        """A state that could not be restored now goes back where it came from."""
        if tier == "ram":
            for old_tokens, old_state in self.parked.put(tokens, state, stored=stored) or ():
                self._offer(old_tokens, old_state)

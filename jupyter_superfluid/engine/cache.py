"""The prefix cache: what each KV sequence ("slot") holds and how a prompt reuses it.

The context has ``n_seq_max`` sequences over one unified KV cache. Each slot
remembers the exact token ids its KV cells hold (positions 0..n-1). A new
prompt goes to the slot sharing its longest common prefix (LCP): extended in
place when that slot is idle and holds only a prefix of the prompt, otherwise
the shared prefix is copied into a free or least-recently-used idle slot with
``llama_memory_seq_cp`` (in a unified cache that only tags the same cells with
another sequence id), so the source branch stays warm for its own
continuation. This class is pure bookkeeping; the KV operations go through the
small ``KVMemory`` interface so the policy can be reasoned about (and tested)
on its own.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Protocol


class KVMemory(Protocol):
    """The two KV operations the cache needs (llama_memory_seq_rm / seq_cp)."""

    def remove(self, seq_id: int, p0: int, p1: int) -> None:
        """Drop positions [p0, p1) of ``seq_id`` (-1: open end)."""
        ...

    def copy(self, src: int, dst: int, p0: int, p1: int) -> None:
        """Make ``dst`` share ``src``'s cells at positions [p0, p1)."""
        ...


@dataclass(eq=False)
class Slot:
    """One KV sequence and the token ids it holds."""

    seq_id: int
    tokens: list[int] = field(default_factory=list)
    busy: bool = False
    last_used: int = 0


@dataclass(frozen=True)
class Placement:
    """Where a prompt goes: its slot and how many prompt tokens are already there."""

    slot: Slot
    reused: int
    source: Slot | None  # the slot the prefix was copied from; None when in place


def common_prefix(a: list[int], b: tuple[int, ...] | list[int]) -> int:
    """Length of the longest common prefix of two token sequences."""
    n = min(len(a), len(b))
    if a[:n] == list(b[:n]):
        return n  # the common case for a continued conversation, at C speed
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


class PrefixCache:
    """Slot bookkeeping and the reuse policy (LCP, in place or copy, LRU)."""

    def __init__(self, n_slots: int, memory: KVMemory) -> None:
        self.slots = [Slot(i) for i in range(n_slots)]
        self._memory = memory
        self._clock = itertools.count(1)

    def has_idle(self) -> bool:
        """Whether a new sequence can start now."""
        return any(not s.busy for s in self.slots)

    def best_match(self, prompt: tuple[int, ...]) -> tuple[Slot, int, bool]:
        """The slot sharing the longest usable prefix: (slot, reusable length, whole).

        ``whole`` says the slot holds nothing beyond that prefix of the prompt.
        Ties go to idle, then most recently used slots.
        """
        limit = len(prompt) - 1  # the last prompt token is always evaluated, for its logits
        best, best_lcp, whole = self.slots[0], 0, False
        for slot in sorted(self.slots, key=lambda s: (s.busy, -s.last_used)):
            raw = common_prefix(slot.tokens, prompt)
            if min(raw, limit) > best_lcp:
                best, best_lcp, whole = slot, min(raw, limit), raw == len(slot.tokens)
        return best, best_lcp, whole

    def place(
        self, prompt: tuple[int, ...], protect: frozenset[int] = frozenset()
    ) -> Placement | None:
        """Claim a slot for ``prompt`` with its KV set to the reusable prefix.

        None when every slot is busy. Slots whose seq_id is in ``protect`` (the
        best matches of other waiting prompts) are overwritten only if nothing
        else is idle, so admitting a burst does not evict its own cache hits.
        """
        if not self.has_idle():
            return None
        best, best_lcp, whole = self.best_match(prompt)
        if best_lcp and whole and not best.busy:
            return self._claim(best, best_lcp, None)  # extend in place
        target = self._free_slot(avoid=best if best_lcp else None, protect=protect)
        if best_lcp == 0:
            return self._claim(target, 0, None)
        if target is best:
            return self._claim(best, best_lcp, None)  # the only idle slot: truncate it
        self._memory.remove(target.seq_id, -1, -1)
        self._memory.copy(best.seq_id, target.seq_id, 0, best_lcp)
        target.tokens = best.tokens[:best_lcp]
        return self._claim(target, best_lcp, best)

    def _free_slot(self, avoid: Slot | None, protect: frozenset[int]) -> Slot:
        """An idle slot to overwrite: empty first, then unprotected, then least recently used."""
        idle = [s for s in self.slots if not s.busy]
        others = [s for s in idle if s is not avoid] or idle
        return min(others, key=lambda s: (len(s.tokens) > 0, s.seq_id in protect, s.last_used))

    def _claim(self, slot: Slot, reused: int, source: Slot | None) -> Placement:
        """Trim ``slot`` to its first ``reused`` tokens and mark it busy."""
        if len(slot.tokens) > reused:
            self._memory.remove(slot.seq_id, reused, -1)
            del slot.tokens[reused:]
        slot.busy = True
        slot.last_used = next(self._clock)
        if source is not None:
            source.last_used = next(self._clock)  # its branch just proved useful
        return Placement(slot, reused, source)

    def release(self, slot: Slot) -> None:
        """The slot's sequence finished; its KV stays as cache."""
        slot.busy = False
        slot.last_used = next(self._clock)

    def clear(self, slot: Slot) -> None:
        """Forget everything ``slot`` holds (after an error, or to evict it)."""
        self._memory.remove(slot.seq_id, -1, -1)
        slot.tokens = []

    def evict_one(self) -> bool:
        """Clear the least recently used idle, non-empty slot; False if there is none."""
        candidates = [s for s in self.slots if not s.busy and s.tokens]
        if not candidates:
            return False
        self.clear(min(candidates, key=lambda s: s.last_used))
        return True

"""The prefix cache: what each KV sequence ("slot") holds and how a prompt reuses it.

The context has ``n_seq_max`` sequences over one unified KV cache. Each slot
remembers the exact token ids its KV cells hold (positions 0..n-1). A new
prompt goes to the slot sharing its longest common prefix (LCP): extended in
place when that slot is idle and holds only a prefix of the prompt, otherwise
the shared prefix is copied into a free or least-recently-used idle slot with
``llama_memory_seq_cp`` (in a unified cache that only tags the same cells with
another sequence id), so the source branch stays warm for its own
continuation.

Idle conversations are *parked*: in a unified cache every token's attention
runs over every used cell, so KV held for conversations that are not running
slows every stream that is (measured: 326 -> 66 tok/s with 8k idle cells).
When other work is admitted, an idle slot's own cells (those no running
sequence shares) are saved to host memory (``llama_state_seq_get_data``) and
freed; a later prompt that matches a parked conversation better than anything
resident restores it (``llama_state_seq_set_data``), which costs a memory copy
instead of re-evaluating the history. The parked store is an LRU bounded in
bytes.

This class is pure bookkeeping; the KV operations go through the small
``KVMemory`` interface so the policy can be reasoned about (and tested) on its
own.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Protocol

# Idle slots holding at most this many cells of their own stay resident: their
# attention cost is small, and parking them would copy their whole history.
PARK_MIN_OWN_TOKENS = 256
# A restore copies the whole parked state; it must save at least one prompt
# token of evaluation per this many tokens copied (prefill costs ~100x a copy).
RESTORE_TOKENS_PER_SAVED = 64


class KVMemory(Protocol):
    """The KV operations the cache needs (llama_memory_seq_rm / seq_cp, state_seq)."""

    def remove(self, seq_id: int, p0: int, p1: int) -> None:
        """Drop positions [p0, p1) of ``seq_id`` (-1: open end)."""
        ...

    def copy(self, src: int, dst: int, p0: int, p1: int) -> None:
        """Make ``dst`` share ``src``'s cells at positions [p0, p1)."""
        ...

    def save(self, seq_id: int) -> bytearray:
        """The serialized KV state of ``seq_id``."""
        ...

    def load(self, seq_id: int, state: bytearray) -> bool:
        """Restore a saved state into the empty ``seq_id``; False when it does not fit."""
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


def common_prefix(a: list[int] | tuple[int, ...], b: tuple[int, ...] | list[int]) -> int:
    """Length of the longest common prefix of two token sequences."""
    n = min(len(a), len(b))
    if list(a[:n]) == list(b[:n]):
        return n  # the common case for a continued conversation, at C speed
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


class ParkedStates:
    """Saved KV states of idle conversations, least recently used first out."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[tuple[int, ...], bytearray] = OrderedDict()
        self.bytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    def put(self, tokens: tuple[int, ...], state: bytearray) -> None:
        """Keep ``state`` for ``tokens``, dropping the oldest entries over the budget."""
        if len(state) > self.max_bytes:
            return
        self.take(tokens)
        self._entries[tokens] = state
        self.bytes += len(state)
        while self.bytes > self.max_bytes:
            _, dropped = self._entries.popitem(last=False)
            self.bytes -= len(dropped)

    def best_match(self, prompt: tuple[int, ...]) -> tuple[tuple[int, ...], int]:
        """The parked tokens sharing the longest prefix with ``prompt`` and that length."""
        best: tuple[int, ...] = ()
        best_lcp = 0
        for tokens in self._entries:
            lcp = common_prefix(tokens, prompt)
            if lcp > best_lcp:
                best, best_lcp = tokens, lcp
        return best, best_lcp

    def take(self, tokens: tuple[int, ...]) -> bytearray | None:
        """Remove and return the state parked for ``tokens``."""
        state = self._entries.pop(tokens, None)
        if state is not None:
            self.bytes -= len(state)
        return state


class PrefixCache:
    """Slot bookkeeping and the reuse policy (LCP, in place or copy, LRU, parking)."""

    def __init__(
        self, n_slots: int, memory: KVMemory, *, kv_cells: int = 1 << 30, park_bytes: int = 0
    ) -> None:
        self.slots = [Slot(i) for i in range(n_slots)]
        self.kv_cells = kv_cells
        self.parked = ParkedStates(park_bytes)
        self._memory = memory
        self._clock = itertools.count(1)
        self.parks = 0
        self.restores = 0

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
        restored = self._restore_better(prompt, best_lcp, protect)
        if restored is not None:
            return restored
        if best_lcp and whole and not best.busy:
            return self._claim(best, best_lcp, None)  # extend in place
        target = self._free_slot(avoid=best if best_lcp else None, protect=protect)
        if best_lcp == 0:
            return self._claim(target, 0, None)
        if target is best:
            self._park(best)  # the only idle slot: keep its branch, then truncate it
            return self._claim(best, best_lcp, None)
        self._discard(target)
        self._memory.copy(best.seq_id, target.seq_id, 0, best_lcp)
        target.tokens = best.tokens[:best_lcp]
        return self._claim(target, best_lcp, best)

    def _restore_better(
        self, prompt: tuple[int, ...], resident_lcp: int, protect: frozenset[int]
    ) -> Placement | None:
        """Bring back a parked conversation when it covers clearly more of ``prompt``."""
        tokens, lcp = self.parked.best_match(prompt)
        lcp = min(lcp, len(prompt) - 1)
        gain = lcp - resident_lcp
        if gain <= 0 or gain * RESTORE_TOKENS_PER_SAVED < len(tokens):
            return None
        target = self._free_slot(avoid=None, protect=protect)
        self._discard(target)
        while self.resident_cells() + len(tokens) > self.kv_cells:
            if not self.evict_one():
                return None  # the running sequences leave no room; evaluate instead
        state = self.parked.take(tokens)
        assert state is not None
        if not self._memory.load(target.seq_id, state):
            self.parked.put(tokens, state)
            return None
        self.restores += 1
        target.tokens = list(tokens)
        return self._claim(target, lcp, None)

    def resident_cells(self) -> int:
        """KV cells in use: every slot's tokens, shared prefixes counted once."""
        held = sorted(s.tokens for s in self.slots if s.tokens)
        total, previous = 0, list[int]()
        for tokens in held:
            # Sorted, the most shared neighbour comes right before each list.
            total += len(tokens) - common_prefix(previous, tokens)
            previous = tokens
        return total

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

    def _park(self, slot: Slot) -> None:
        """Save ``slot``'s state to host memory (its KV cells stay until discarded)."""
        if self.parked.max_bytes and len(slot.tokens) > 1:
            self.parked.put(tuple(slot.tokens), self._memory.save(slot.seq_id))
            self.parks += 1

    def _discard(self, slot: Slot) -> None:
        """Park, then free, whatever ``slot`` holds."""
        if slot.tokens:
            self._park(slot)
            self.clear(slot)

    def park_idle(self, protect: frozenset[int] = frozenset()) -> int:
        """Park idle slots holding many cells no running sequence shares; how many."""
        if not self.parked.max_bytes:
            return 0
        running = [s.tokens for s in self.slots if s.busy]
        if not running:
            return 0
        count = 0
        for slot in self.slots:
            if slot.busy or slot.seq_id in protect or not slot.tokens:
                continue
            shared = max(common_prefix(slot.tokens, tokens) for tokens in running)
            if len(slot.tokens) - shared > PARK_MIN_OWN_TOKENS:
                self._discard(slot)
                count += 1
        return count

    def release(self, slot: Slot) -> None:
        """The slot's sequence finished; its KV stays as cache."""
        slot.busy = False
        slot.last_used = next(self._clock)

    def clear(self, slot: Slot) -> None:
        """Forget everything ``slot`` holds (after an error, or to evict it)."""
        self._memory.remove(slot.seq_id, -1, -1)
        slot.tokens = []

    def evict_one(self) -> bool:
        """Park and free the least recently used idle, non-empty slot; False if there is none."""
        candidates = [s for s in self.slots if not s.busy and s.tokens]
        if not candidates:
            return False
        self._discard(min(candidates, key=lambda s: s.last_used))
        return True

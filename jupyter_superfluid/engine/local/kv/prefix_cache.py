"""The prefix cache: what each KV sequence ("slot") holds and how a prompt reuses it.

The context has ``n_seq_max`` sequences, each with a KV stream of its own (the
default) or all in one unified KV cache. Each slot remembers the exact token ids
its KV cells hold (positions 0..n-1). A new prompt goes to the slot sharing its
longest common prefix (LCP): extended in place when that slot is idle and holds
only a prefix of the prompt, otherwise the shared prefix is copied into a free
or least-recently-used idle slot with ``llama_memory_seq_cp`` (between streams a
copy of the source's stream; in a unified cache only a tag on the same cells),
so the source branch stays warm for its own continuation.

Warm state has three tiers: the resident cells, host memory (``memory_tier.py``)
and disk (``disk_tier.py``). With a stream per slot a sequence attends over its
own cells only, so idle slots stay resident until a new sequence needs their
slot. In a unified cache every token's attention runs over every used cell, so
KV held for conversations that are not running slows every stream that is
(measured: 326 -> 66 tok/s with 8k idle cells); when other work is admitted,
idle slots are moved out. Only what can be continued is kept: a
slot's ``keep`` counts the tokens of a turn whose request asked to be retained
(a stored response points at it), and a prefix that several prompts began with
(shared instructions, a conversation resent whole) is kept too. The rest, a
one-off turn's own tokens, is dropped without a copy. A park is skipped when
the measured cost of saving and restoring exceeds that of evaluating again.

A prompt whose longest cached prefix is parked (or was read back from disk by
the worker before admission) is restored by a copy
(``llama_state_seq_set_data``) and checked (the sequence must then end at
position n-1) before it counts as cached.

This class is pure bookkeeping; the KV operations go through the small
``KVMemory`` interface so the policy can be reasoned about on its own.
"""

from __future__ import annotations

import itertools
import time

from jupyter_superfluid.engine.local.kv.memory_tier import KVCosts, ParkedStates
from jupyter_superfluid.engine.local.kv.prefix_index import (
    BLOCK,
    PrefixCounter,
    block_hashes,
    common_prefix,
)
from jupyter_superfluid.engine.local.kv.restoring import Restoring
from jupyter_superfluid.engine.local.kv.slots import Placement, Slot
from jupyter_superfluid.engine.local.kv.state import KVMemory, KVState, Staged, StateStore
from jupyter_superfluid.engine.local.kv.write_behind import WriteBehind

__all__ = ["PARK_MIN_OWN_TOKENS", "Placement", "PrefixCache", "Slot"]

# Idle slots holding at most this many cells of their own stay resident: their
# attention cost is small, and parking them would copy their whole history.
PARK_MIN_OWN_TOKENS = 256


class PrefixCache(Restoring, WriteBehind):
    """Slot bookkeeping and the reuse policy (LCP, in place or copy, LRU, tiers)."""

    def __init__(
        self,
        n_slots: int,
        memory: KVMemory,
        *,
        kv_cells: int = 1 << 30,
        park_bytes: int = 0,
        store: StateStore | None = None,
        streams: bool = False,
    ) -> None:
        self.slots = [Slot(i) for i in range(n_slots)]
        self.kv_cells = kv_cells  # unified: the cells all slots share
        self.streams = streams  # a KV stream per slot: slots never compete for cells
        self.parked = ParkedStates(park_bytes)
        self.store = store
        self.costs = KVCosts()
        self.recurring = PrefixCounter()
        self._memory = memory
        self._clock = itertools.count(1)
        self.parks = 0
        self.parked_bytes = 0  # all the parks ever made, in bytes
        self.restores = 0
        self.disk_restores = 0
        self.parks_skipped = 0  # a park would have cost more than evaluating again
        self.restores_invalid = 0
        self.saves = 0  # states copied out of the context (parks and disk writes)
        self.drops = 0  # idle slots freed without a copy: others hold all but their short tail

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

    def memory_match(self, prompt: tuple[int, ...], hashes: list[int]) -> int:
        """The longest prefix of ``prompt`` resident or parked (to weigh a disk read against)."""
        return max(self.best_match(prompt)[1], self.parked.best_match(prompt, hashes)[1])

    def place(
        self,
        prompt: tuple[int, ...],
        protect: frozenset[int] = frozenset(),
        *,
        retain: bool = False,
        hashes: list[int] | None = None,
        staged: Staged | None = None,
    ) -> Placement | None:
        """Claim a slot for ``prompt`` with its KV set to the reusable prefix.

        None when every slot is busy. Slots whose seq_id is in ``protect`` (the
        best matches of other waiting prompts) are overwritten only if nothing
        else is idle, so admitting a burst does not evict its own cache hits.
        ``retain``: keep this turn's state when the slot is moved out (it can
        be continued). ``staged``: a state read from disk for this prompt.
        """
        if not self.has_idle():
            return None
        hashes = block_hashes(prompt) if hashes is None else hashes
        self.recurring.note(hashes)
        best, best_lcp, whole = self.best_match(prompt)
        placement = self._restore_better(prompt, hashes, best_lcp, protect, staged)
        if placement is None:
            placement = self._place_resident(best, best_lcp, whole, protect)
        placement.slot.retaining = retain
        return placement

    def _place_resident(
        self, best: Slot, best_lcp: int, whole: bool, protect: frozenset[int]
    ) -> Placement:
        """Reuse ``best``'s prefix in place or by a copy into another idle slot."""
        if best_lcp and whole and not best.busy:
            return self._claim(best, best_lcp, None)  # extend in place
        target = self._free_slot(avoid=best if best_lcp else None, protect=protect)
        if best_lcp and target is not best and self.streams:
            # A copy into a slot that holds something loses that, as a trim loses the
            # one-off's tail, and costs a save and a restore; a gap among the running
            # streams costs every step.
            beside = self._busy_neighbours(best) >= self._busy_neighbours(target)
            no_copy = not self._copy_pays(best_lcp, best)
            if beside and (no_copy or target.tokens) and self._trim_pays(best, best_lcp, target):
                target = best  # trimmed in place: it loses only a one-off's tail
            elif no_copy:
                best_lcp = 0  # evaluating the shared prefix again is cheaper than copying it
        if best_lcp == 0:
            self._vacate(target)
            return self._claim(target, 0, None)
        if target is best:
            self._park(best, above=best_lcp)  # the only idle slot: keep its branch, then trim
            return self._claim(best, best_lcp, None)
        self._vacate(target)
        started = time.perf_counter()
        self._memory.copy(best.seq_id, target.seq_id, best_lcp)
        self.costs.note_copy(len(best.tokens), time.perf_counter() - started)
        target.tokens = best.tokens[:best_lcp]
        target.keep = min(best.keep, best_lcp)
        target.persisted = min(best.persisted, best_lcp)
        return self._claim(target, best_lcp, best)

    def _copy_pays(self, shared: int, source: Slot) -> bool:
        """Whether to copy ``shared`` leading cells of ``source`` into another slot rather
        than evaluate them.

        In a unified cache a copy only tags the cells. Between streams it saves and
        restores ``source``'s whole sequence, so it must beat evaluating ``shared``
        tokens (``KVCosts``); a prefix shorter than one block, such as a chat template's
        opening, is evaluated.
        """
        if not self.streams:
            return True
        return shared >= BLOCK and self.costs.copy_pays(shared, len(source.tokens))

    def _trim_pays(self, best: Slot, shared: int, target: Slot) -> bool:
        """Whether to reuse ``best`` in place, cut to its ``shared`` prefix, rather than
        ``target``: what it holds past that is a one-off's, and either ``target`` holds
        something too or that tail is no longer than the prefix (the same prompt again)."""
        if best.busy or self.keep_length(best) > shared:
            return False
        return bool(target.tokens) or len(best.tokens) - shared <= shared

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
        """An idle slot to overwrite: unprotected, holding nothing kept, beside a busy one
        (with streams), empty, least recent."""
        idle = [s for s in self.slots if not s.busy]
        others = [s for s in idle if s is not avoid] or idle
        return min(
            others,
            key=lambda s: (
                s.seq_id in protect,
                s.keep > 0,
                -self._busy_neighbours(s),
                len(s.tokens) > 0,
                s.last_used,
            ),
        )

    def _busy_neighbours(self, slot: Slot) -> int:
        """How many of the slots with adjacent ids are running (0 in a unified cache).

        With a stream per slot llama.cpp batches only sequences of consecutive ids
        together (one pass of the weights each run of them), so a new sequence that
        joins a run of running ones costs a step far less than one that opens a gap.
        """
        if not self.streams:
            return 0
        ids = (slot.seq_id - 1, slot.seq_id + 1)
        return sum(1 for s in self.slots if s.seq_id in ids and s.busy)

    def _claim(self, slot: Slot, reused: int, source: Slot | None, restored: str = "") -> Placement:
        """Trim ``slot`` to its first ``reused`` tokens and mark it busy."""
        self._trim(slot, reused)
        slot.busy = True
        slot.last_used = next(self._clock)
        if source is not None:
            source.last_used = next(self._clock)  # its branch just proved useful
        return Placement(slot, reused, source, restored)

    def _trim(self, slot: Slot, length: int) -> None:
        """Drop ``slot``'s tokens from ``length`` on."""
        if len(slot.tokens) > length:
            self._memory.remove(slot.seq_id, length, -1)
            del slot.tokens[length:]
        slot.keep = min(slot.keep, length)
        slot.persisted = min(slot.persisted, length)

    def keep_length(self, slot: Slot) -> int:
        """Leading tokens of ``slot`` worth keeping: a retained turn's, or a recurring prefix."""
        if slot.keep >= len(slot.tokens):
            return len(slot.tokens)
        return max(slot.keep, min(self.recurring.recurring(slot.tokens), len(slot.tokens)))

    def _park(self, slot: Slot, above: int = 0) -> bool:
        """Save what ``slot`` keeps beyond ``above`` tokens to host memory (or disk)."""
        n = self.keep_length(slot)
        if n <= above or n < BLOCK:
            return False
        needs_disk = self.store is not None and slot.persisted < n and min(slot.tokens[:n]) >= 0
        if not (self.parked.max_bytes or needs_disk):
            return False
        if self.parked.covers(tuple(slot.tokens[:n])):
            return True  # host memory holds these tokens already (shared instructions, say)
        if not self.costs.park_pays():
            self.parks_skipped += 1
            return False
        self._trim(slot, n)
        tokens = tuple(slot.tokens)
        state = self._save(slot)
        dropped = self.parked.put(tokens, state, stored=not needs_disk, since=slot.idle_since)
        if dropped is None:  # no room in host memory: straight to disk
            if needs_disk:
                self._offer(tokens, state)
            return True
        self.parks += 1
        self.parked_bytes += len(state)
        for old_tokens, old_state in dropped:  # fell out of host memory: down to disk
            self._offer(old_tokens, old_state)
        return True

    def _offer(self, tokens: tuple[int, ...], state: KVState, *, wait: float = 0.0) -> bool:
        """Hand ``state`` to the disk tier (written in the background); False if refused."""
        return self.store is not None and self.store.offer(tokens, state, wait=wait)

    def _save(self, slot: Slot) -> KVState:
        """The slot's state, timed."""
        started = time.perf_counter()
        state = self._memory.save(slot.seq_id)
        self.saves += 1
        self.costs.note_save(len(slot.tokens), time.perf_counter() - started)
        return state

    def _discard(self, slot: Slot) -> None:
        """Park what ``slot`` keeps, then free it."""
        if slot.tokens:
            self._park(slot)
            self.clear(slot)

    def shared_cells(self, slot: Slot) -> int:
        """Leading tokens of ``slot`` another slot holds too (freeing it keeps them)."""
        others = (common_prefix(slot.tokens, s.tokens) for s in self.slots if s is not slot)
        return max(others, default=0)

    def _vacate(self, slot: Slot) -> None:
        """Free ``slot``: parked unless another slot holds all but its short tail.

        Such a branch would be saved whole (a copy of every cell) to spare
        evaluating its tail again, and restored beside the cells it shares.
        """
        shared = self.shared_cells(slot) if slot.tokens else 0
        if shared and len(slot.tokens) - shared <= min(shared, PARK_MIN_OWN_TOKENS):
            self.drops += 1
            self.clear(slot)
        else:
            self._discard(slot)

    def park_idle(
        self,
        protect: frozenset[int] = frozenset(),
        *,
        pressed: bool = False,
        running_cells: int = 0,
    ) -> int:
        """Move idle slots' own cells out of the running sequences' way; how many slots.

        Only when they are in the way: ``pressed`` (the caller is short of cells,
        or has sequences waiting), or idle cells the running ones share nothing
        with outnumber the ``running_cells`` the running ones will hold (attending
        over them would more than double every step). What a slot keeps is parked (if host memory is
        given); the rest, a one-off turn's tail, is dropped without a copy. With a stream per
        slot nothing idle is in the way: slots are vacated only when a prompt claims them.
        """
        running = [s.tokens for s in self.slots if s.busy]
        if not running or self.streams:
            return 0
        idle = []
        for slot in self.slots:
            if slot.busy or slot.seq_id in protect or not slot.tokens:
                continue
            shared = max(common_prefix(slot.tokens, tokens) for tokens in running)
            if len(slot.tokens) - shared > PARK_MIN_OWN_TOKENS:
                idle.append((slot, shared))
        running_cells = max(running_cells, sum(map(len, running)))
        if not pressed and sum(len(s.tokens) - n for s, n in idle) <= running_cells:
            return 0
        count = 0
        for slot, shared in idle:
            keep = self.keep_length(slot)
            if keep - shared <= PARK_MIN_OWN_TOKENS:
                self._trim(slot, max(keep, shared))
            elif self.parked.max_bytes:
                self._discard(slot)
            else:
                continue  # nowhere to park it: it stays until the KV cache is full
            count += 1
        return count

    def release(self, slot: Slot) -> None:
        """The slot's sequence finished; its KV stays as cache."""
        if slot.retaining:
            slot.keep = len(slot.tokens)
            slot.retaining = False
        slot.busy = False
        slot.last_used = next(self._clock)
        slot.idle_since = time.monotonic()

    def clear(self, slot: Slot) -> None:
        """Forget everything ``slot`` holds (after an error, or to evict it)."""
        self._memory.remove(slot.seq_id, -1, -1)
        slot.tokens = []
        slot.keep = slot.persisted = 0
        slot.retaining = False

    def evict_one(self) -> bool:
        """Free the least recently used idle, non-empty slot (one-offs first), parked if kept."""
        candidates = [s for s in self.slots if not s.busy and s.tokens]
        if not candidates:
            return False
        self._vacate(min(candidates, key=lambda s: (s.keep > 0, s.last_used)))
        return True

    def stats(self) -> dict[str, object]:
        """What the cache holds and has done, for the models endpoint."""
        return {
            "parked": self.parks,
            "parked_bytes": self.parked_bytes,
            "restored": self.restores,
            "restored_from_disk": self.disk_restores,
            "parks_skipped": self.parks_skipped,
            "restores_invalid": self.restores_invalid,
            "states_saved": self.saves,
            "slots_dropped": self.drops,
            "ram_states": len(self.parked),
            "ram_bytes": self.parked.bytes,
            "ram_evicted": self.parked.evicted,
            "unsaved": self.unsaved() if self.store is not None else 0,
            **self.costs.to_json(),
        }

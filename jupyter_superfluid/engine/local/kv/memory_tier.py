"""Saved KV states in host memory, and what saving and restoring them costs.

``ParkedStates`` is the host-memory tier: an LRU bounded in bytes, found by
token prefix through a ``BlockIndex`` (cheap at thousands of entries).

``KVCosts`` keeps measured seconds per token of evaluating a prompt and of
saving and restoring a state, so the cache can skip a park that would cost more
than the evaluation it saves (on a GPU, evaluation can be cheaper than a copy).
"""

from __future__ import annotations

from collections import OrderedDict

from jupyter_superfluid.engine.local.kv.prefix_index import BLOCK, BlockIndex
from jupyter_superfluid.engine.local.kv.state import KVState

# Until measured: a restore must save one prompt token of evaluation per this many
# tokens copied back from host memory, or read from disk.
RESTORE_TOKENS_PER_SAVED = 64
RESTORE_DISK_TOKENS_PER_SAVED = 8
# A park must cost less than this share of evaluating the same tokens again.
PARK_PAYS_BELOW = 0.5
_EWMA = 0.2  # weight of the newest measurement


class ParkedStates:
    """Saved KV states of idle conversations, least recently used first out.

    Entries also remember whether the disk tier holds them: one that falls out
    and is not on disk is handed back, for the caller to write (write-back).
    """

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[tuple[int, ...], KVState] = OrderedDict()
        self._index: BlockIndex[tuple[int, ...], tuple[int, ...]] = BlockIndex()
        # Not on disk, oldest first: when each one's conversation went idle.
        self._unstored: dict[tuple[int, ...], float] = {}
        self.bytes = 0
        self.evicted = 0  # entries dropped for room

    def __len__(self) -> int:
        return len(self._entries)

    def put(
        self, tokens: tuple[int, ...], state: KVState, *, stored: bool = False, since: float = 0.0
    ) -> list[tuple[tuple[int, ...], KVState]] | None:
        """Keep ``state`` for ``tokens``; the entries not on disk that fell out for it.

        States it subsumes (of a prefix of ``tokens``) go without a word:
        restoring this one serves their prompts too. None when ``state`` is too
        big or ``tokens`` too short to keep.
        """
        if len(state) > self.max_bytes or len(tokens) < BLOCK:
            return None
        self.take(tokens)
        for older in self._index.prefixes_of(tokens):
            self.take(older)
        self._index.add(tokens, tokens)
        self._entries[tokens] = state
        if not stored:
            self._unstored[tokens] = since
        self.bytes += len(state)
        dropped = []
        while self.bytes > self.max_bytes:
            oldest = next(iter(self._entries))
            unstored = oldest in self._unstored
            state = self.take(oldest)  # type: ignore[assignment]
            self.evicted += 1
            if unstored:
                dropped.append((oldest, state))
        return dropped

    def best_match(
        self, prompt: tuple[int, ...], hashes: list[int] | None = None
    ) -> tuple[tuple[int, ...], int]:
        """The parked tokens sharing the longest prefix with ``prompt`` and that length."""
        key, lcp = self._index.best(prompt, hashes)
        return (key, lcp) if key is not None else ((), 0)

    def covers(self, tokens: tuple[int, ...]) -> bool:
        """Whether an entry holds all of ``tokens`` (it becomes the most recently used)."""
        key, lcp = self._index.best(tokens)
        if key is None or lcp < len(tokens):
            return False
        self._entries.move_to_end(key)
        return True

    def take(self, tokens: tuple[int, ...]) -> KVState | None:
        """Remove and return the state parked for ``tokens``."""
        state = self._entries.pop(tokens, None)
        if state is not None:
            self.bytes -= len(state)
            self._index.remove(tokens)
            self._unstored.pop(tokens, None)
        return state

    @property
    def unstored(self) -> int:
        """Entries the disk does not hold."""
        return len(self._unstored)

    def is_stored(self, tokens: tuple[int, ...]) -> bool:
        """Whether the disk holds the parked ``tokens`` (as far as this tier knows)."""
        return tokens in self._entries and tokens not in self._unstored

    def newest_unstored(
        self, before: float = float("inf")
    ) -> tuple[tuple[int, ...], KVState] | None:
        """The most recently parked entry the disk does not hold, idle since ``before``."""
        for tokens in reversed(self._unstored):
            if self._unstored[tokens] <= before:
                return tokens, self._entries[tokens]
        return None

    def unstored_since(self) -> list[float]:
        """When each entry the disk does not hold went idle."""
        return list(self._unstored.values())

    def mark_stored(self, tokens: tuple[int, ...]) -> None:
        """The disk now holds ``tokens``."""
        self._unstored.pop(tokens, None)


class KVCosts:
    """Measured seconds per token: prompt evaluation, state save, state restore."""

    def __init__(self) -> None:
        self.eval_s: float | None = None
        self.save_s: float | None = None
        self.load_s: float | None = None
        self.read_s: float | None = None  # reading and checking a file, per token
        self.copy_s: float | None = None  # a copy between streams (save and load), per token

    @staticmethod
    def _mix(old: float | None, seconds: float, tokens: int) -> float:
        per_token = seconds / tokens
        return per_token if old is None else (1 - _EWMA) * old + _EWMA * per_token

    def note_eval(self, tokens: int, seconds: float) -> None:
        """A decode of ``tokens`` prompt tokens took ``seconds``."""
        if tokens > 0:
            self.eval_s = self._mix(self.eval_s, seconds, tokens)

    def note_save(self, tokens: int, seconds: float) -> None:
        """Saving a state of ``tokens`` tokens took ``seconds``."""
        if tokens > 0:
            self.save_s = self._mix(self.save_s, seconds, tokens)

    def note_load(self, tokens: int, seconds: float) -> None:
        """Restoring a state of ``tokens`` tokens took ``seconds``."""
        if tokens > 0:
            self.load_s = self._mix(self.load_s, seconds, tokens)

    def note_copy(self, tokens: int, seconds: float) -> None:
        """Copying a ``tokens``-token state between streams took ``seconds``."""
        if tokens > 0:
            self.copy_s = self._mix(self.copy_s, seconds, tokens)

    def note_read(self, tokens: int, seconds: float) -> None:
        """Reading and checking the file of a ``tokens``-token state took ``seconds``."""
        if tokens > 0:
            self.read_s = self._mix(self.read_s, seconds, tokens)

    def restore_pays(self, gain: int, tokens: int, *, disk: bool) -> bool:
        """Whether restoring a ``tokens``-token state beats evaluating the ``gain`` it saves.

        Measured costs decide once known; until then a restore must save one
        token of evaluation per 64 tokens copied from memory (prefill costs
        ~100x a copy), or per 8 read from disk.
        """
        if gain <= 0:
            return False
        copy = self.load_s if self.load_s is not None else self.save_s
        read = self.read_s if disk else 0.0
        if self.eval_s is None or copy is None or read is None:
            return (
                gain * (RESTORE_DISK_TOKENS_PER_SAVED if disk else RESTORE_TOKENS_PER_SAVED)
                >= tokens
            )
        return gain * self.eval_s > tokens * (copy + read)

    def copy_pays(self, gain: int, tokens: int) -> bool:
        """Whether copying a ``tokens``-token state between streams beats evaluating ``gain``.

        Judged by measured copies only: a park's save goes into fresh memory, whose page
        faults a copy (through the buffer the engine keeps) does not pay.
        """
        if self.eval_s is None or self.copy_s is None:
            return gain * RESTORE_TOKENS_PER_SAVED >= tokens
        return gain * self.eval_s > tokens * self.copy_s

    def park_pays(self) -> bool:
        """Whether saving and later restoring costs less than evaluating again (True unmeasured)."""
        if self.eval_s is None or self.save_s is None:
            return True
        copy = self.save_s + (self.load_s if self.load_s is not None else self.save_s)
        return copy < PARK_PAYS_BELOW * self.eval_s

    def to_json(self) -> dict[str, float | None]:
        """Microseconds per token, for the models endpoint."""

        def us(v: float | None) -> float | None:
            return None if v is None else round(v * 1e6, 3)

        return {
            "eval_us_per_token": us(self.eval_s),
            "save_us_per_token": us(self.save_s),
            "restore_us_per_token": us(self.load_s),
            "disk_read_us_per_token": us(self.read_s),
        }

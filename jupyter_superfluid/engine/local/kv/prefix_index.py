"""Token-prefix indexes over hashed blocks, so look-ups stay cheap at thousands of states.

A token sequence is cut into blocks of ``BLOCK`` tokens; block k's hash chains
the hash of block k-1 with its own tokens, so one hash names a whole prefix
(as vLLM's prefix caching and SGLang's radix tree key their KV blocks). An
entry is registered under the hash of every whole block it holds; a prompt
finds the entries sharing its longest block-aligned prefix with one dictionary
look-up per block, then the exact longest common prefix is measured on a few
of them (hashes only choose candidates: a collision can cost a match, never
give a wrong one). Entries shorter than one block are not indexed.

``PrefixCounter`` counts how many prompts each block prefix began, so the cache
can tell a prefix that recurs (shared instructions and tools, a conversation
resent whole) from a one-off turn.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Iterator, Sequence
from typing import Generic, TypeVar

BLOCK = 32
# Exact comparisons made among the entries sharing a prompt's deepest matched
# block (the most recently added first): at most BLOCK - 1 tokens are lost
# when a better one is further back.
CANDIDATES = 8

K = TypeVar("K", bound=Hashable)
T = TypeVar("T", bound=Sequence[int])  # how an index keeps token ids (tuple, array)


def block_hashes(tokens: Sequence[int]) -> list[int]:
    """Chained hashes of each whole block: item k names ``tokens[: (k + 1) * BLOCK]``."""
    out: list[int] = []
    h = 0
    for start in range(0, len(tokens) - BLOCK + 1, BLOCK):
        h = hash((h, tuple(tokens[start : start + BLOCK])))
        out.append(h)
    return out


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix of two token sequences."""
    n = min(len(a), len(b))
    if tuple(a[:n]) == tuple(b[:n]):
        return n  # the common case for a continued conversation, at C speed
    lo, hi = 0, n  # a[:lo] == b[:lo], a[:hi] != b[:hi]: halve, comparing slices in C
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if tuple(a[lo:mid]) == tuple(b[lo:mid]):
            lo = mid
        else:
            hi = mid
    return lo


class BlockIndex(Generic[K, T]):
    """Entries (any hashable key with its token ids) found by their longest shared prefix."""

    def __init__(self) -> None:
        self._tokens: dict[K, T] = {}
        self._levels: dict[int, dict[K, None]] = {}  # block hash -> keys holding that prefix
        self._ends: dict[int, dict[K, None]] = {}  # last whole block's hash -> keys

    def __len__(self) -> int:
        return len(self._tokens)

    def __contains__(self, key: object) -> bool:
        return key in self._tokens

    def __iter__(self) -> Iterator[K]:
        return iter(self._tokens)

    def tokens(self, key: K) -> T:
        """The token ids ``key`` was added with."""
        return self._tokens[key]

    def add(self, key: K, tokens: T) -> bool:
        """Index ``key`` under every whole block of ``tokens``; False if it is too short."""
        hashes = block_hashes(tokens)
        if not hashes:
            return False
        self.remove(key)
        self._tokens[key] = tokens
        for h in hashes:
            self._levels.setdefault(h, {})[key] = None
        self._ends.setdefault(hashes[-1], {})[key] = None
        return True

    def remove(self, key: K) -> None:
        """Forget ``key`` (no error if it is not indexed)."""
        tokens = self._tokens.pop(key, None)
        if tokens is None:
            return
        hashes = block_hashes(tokens)
        for h in hashes:
            _discard(self._levels, h, key)
        _discard(self._ends, hashes[-1], key)

    def best(self, prompt: Sequence[int], hashes: list[int] | None = None) -> tuple[K | None, int]:
        """The entry sharing the longest prefix with ``prompt`` and that length (None, 0: none)."""
        hashes = block_hashes(prompt) if hashes is None else hashes
        depth = 0
        while depth < len(hashes) and hashes[depth] in self._levels:
            depth += 1
        if depth == 0:
            return None, 0
        best_key: K | None = None
        best_lcp = 0
        for n, key in enumerate(reversed(self._levels[hashes[depth - 1]])):
            if n == CANDIDATES:
                break
            lcp = common_prefix(self._tokens[key], prompt)
            if lcp > best_lcp:
                best_key, best_lcp = key, lcp
        return best_key, best_lcp

    def prefixes_of(self, tokens: Sequence[int], hashes: list[int] | None = None) -> list[K]:
        """Entries whose token ids are a prefix of ``tokens`` (``tokens``' own entry too)."""
        hashes = block_hashes(tokens) if hashes is None else hashes
        found = []
        for h in hashes:
            for key in self._ends.get(h, ()):
                held = self._tokens[key]
                if len(held) <= len(tokens) and common_prefix(held, tokens) == len(held):
                    found.append(key)
        return found


def _discard(table: dict[int, dict[K, None]], h: int, key: K) -> None:
    """Remove ``key`` from ``table[h]``, and the bucket once it is empty."""
    bucket = table.get(h)
    if bucket is not None:
        bucket.pop(key, None)
        if not bucket:
            del table[h]


class PrefixCounter:
    """How many prompts began with each block prefix, for the most recent ``capacity`` ones."""

    def __init__(self, capacity: int = 1 << 16) -> None:
        self.capacity = capacity
        self._counts: OrderedDict[int, int] = OrderedDict()

    def note(self, hashes: list[int]) -> None:
        """Count one prompt with these block hashes."""
        counts = self._counts
        for h in hashes:
            counts[h] = counts.get(h, 0) + 1
            counts.move_to_end(h)
        while len(counts) > self.capacity:
            counts.popitem(last=False)

    def recurring(self, tokens: Sequence[int], times: int = 2) -> int:
        """Tokens of the longest block prefix of ``tokens`` that ``times`` prompts began with."""
        h, length = 0, 0
        for start in range(0, len(tokens) - BLOCK + 1, BLOCK):
            h = hash((h, tuple(tokens[start : start + BLOCK])))  # as block_hashes, lazily
            if self._counts.get(h, 0) < times:
                break
            length = start + BLOCK
        return length

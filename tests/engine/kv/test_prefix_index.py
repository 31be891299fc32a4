"""The hashed block-prefix index agrees with a linear longest-prefix scan."""

from __future__ import annotations

import random

from jupyter_superfluid.engine.local.kv.prefix_index import (
    BLOCK,
    BlockIndex,
    PrefixCounter,
    block_hashes,
    common_prefix,
)


def _naive_lcp(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def _tree_of_sequences(rng: random.Random, count: int) -> list[tuple[int, ...]]:
    """Sequences that branch off each other at random points, as conversations do."""
    out = [tuple(rng.randrange(50) for _ in range(rng.randrange(BLOCK, 6 * BLOCK)))]
    while len(out) < count:
        stem = rng.choice(out)
        cut = rng.randrange(len(stem) + 1)
        tail = tuple(rng.randrange(50) for _ in range(rng.randrange(1, 4 * BLOCK)))
        if cut + len(tail) >= BLOCK:
            out.append(stem[:cut] + tail)
    return out


def test_common_prefix_is_exact() -> None:
    rng = random.Random(1)
    for _ in range(500):
        a = tuple(rng.randrange(3) for _ in range(rng.randrange(60)))
        b = a[: rng.randrange(len(a) + 1)] + tuple(rng.randrange(3) for _ in range(5))
        assert common_prefix(a, b) == _naive_lcp(a, b)
        assert common_prefix(list(a), b) == _naive_lcp(a, b)


def test_best_finds_the_longest_prefix_a_linear_scan_finds() -> None:
    rng = random.Random(2)
    entries = _tree_of_sequences(rng, 400)
    index: BlockIndex[int, tuple[int, ...]] = BlockIndex()
    for key, tokens in enumerate(entries):
        assert index.add(key, tokens)
    for prompt in _tree_of_sequences(random.Random(3), 200) + entries[:50]:
        key, lcp = index.best(prompt)
        linear = max(_naive_lcp(t, prompt) for t in entries)
        if linear < BLOCK:
            assert (key, lcp) == (None, 0)  # nothing shares a whole block
            continue
        assert key is not None and lcp == _naive_lcp(entries[key], prompt)
        # Only the exact tail inside the last shared block may be missed.
        assert linear - BLOCK < lcp <= linear


def test_removed_entries_are_not_found() -> None:
    index: BlockIndex[str, tuple[int, ...]] = BlockIndex()
    a = tuple(range(3 * BLOCK))
    index.add("a", a)
    index.add("b", a[:BLOCK] + (999,) * BLOCK)
    index.remove("a")
    assert index.best(a) == ("b", BLOCK)
    index.remove("b")
    assert index.best(a) == (None, 0) and len(index) == 0
    assert not index.add("short", a[: BLOCK - 1])  # under one block: not indexed


def test_prefixes_of_lists_the_entries_a_sequence_subsumes() -> None:
    index: BlockIndex[str, tuple[int, ...]] = BlockIndex()
    long = tuple(range(5 * BLOCK))
    index.add("turn1", long[: 2 * BLOCK + 5])
    index.add("turn2", long[: 4 * BLOCK])
    index.add("branch", long[: 2 * BLOCK] + (7,) * 40)
    assert sorted(index.prefixes_of(long)) == ["turn1", "turn2"]
    assert index.prefixes_of(long[: 3 * BLOCK]) == ["turn1"]


def test_a_prefix_recurs_once_two_prompts_began_with_it() -> None:
    counter = PrefixCounter()
    shared = tuple(range(3 * BLOCK + 10))
    first = shared + (1,) * 50
    counter.note(block_hashes(first))
    assert counter.recurring(first) == 0
    second = shared + (2,) * 50
    counter.note(block_hashes(second))
    assert counter.recurring(second) == 3 * BLOCK  # the shared whole blocks, not the tail
    assert counter.recurring(first + (5,) * 100) == 3 * BLOCK


def test_the_counter_forgets_the_oldest_prefixes() -> None:
    counter = PrefixCounter(capacity=4)
    old = tuple(range(2 * BLOCK))
    counter.note(block_hashes(old))
    counter.note(block_hashes(old))
    assert counter.recurring(old) == 2 * BLOCK
    for i in range(4):
        counter.note(block_hashes(tuple(range(1000 + i, 1000 + i + BLOCK))))
    assert counter.recurring(old) == 0

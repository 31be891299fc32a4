"""Committed sessions' tokens are remembered: a continued turn reads no events.

The events table is emptied behind the store's back to show what is read from memory;
what a purge removes is never answered from memory.
"""

from __future__ import annotations

import sqlite3
from array import array

import pytest

from jupyter_superfluid.store import SessionNotFound, Store
from jupyter_superfluid.store.session_tokens import SessionTokens

from .helpers import flat, respond


def _empty_the_log(store: Store) -> None:
    with sqlite3.connect(store.path) as conn:
        conn.execute("DELETE FROM events")


def _end(store: Store, response_id: str) -> int:
    record = store.get_response(response_id)
    assert record is not None
    return record.end


def test_a_chain_of_turns_is_continued_without_reading_the_log(store: Store) -> None:
    r1, _s1, e1 = respond(store, "one")
    r2, s2, e2 = respond(store, "two", previous=r1)
    r3a, s3a, e3a = respond(store, "three a", previous=r2)
    r3b, s3b, e3b = respond(store, "three b", previous=r2)  # a branch off the same turn
    _empty_the_log(store)
    assert store.session_tokens(s3a, _end(store, r3a)) == flat(e1 + e2 + e3a)
    assert store.session_tokens(s3b, _end(store, r3b)) == flat(e1 + e2 + e3b)
    assert store.session_tokens(s2, _end(store, r2)) == flat(e1 + e2)
    # An end nothing committed at is read from the log (now empty).
    assert store.session_tokens(s2, _end(store, r2) - 1) == []


def test_a_turn_whose_base_is_not_remembered_is_read_from_the_log(root) -> None:
    with Store(root) as first:
        r1, s1, e1 = respond(first, "one")
    with Store(root) as store:  # a new process: nothing remembered
        r2, s2, e2 = respond(store, "two", previous=r1)
        end = _end(store, r2)
        assert store.session_tokens(s2, end) == flat(e1 + e2)  # read, then remembered
        _empty_the_log(store)
        assert store.session_tokens(s2, end) == flat(e1 + e2)
        assert store.session_tokens(s1, _end(store, r1)) == []  # never remembered


@pytest.mark.parametrize("how", ["response", "conversation"])
def test_purged_sessions_are_not_answered_from_memory(store: Store, how: str) -> None:
    conv = store.create_conversation("conv_1", None, {}, []) if how == "conversation" else None
    r1, s1, _ = respond(store, "one", conversation=None if conv is None else conv.id)
    end = _end(store, r1)
    assert store.session_tokens(s1, end)  # remembered
    if conv is None:
        assert store.delete_response(r1)
    else:
        store.delete_conversation(conv.id, None)
    with pytest.raises(SessionNotFound):
        store.session_tokens(s1, end)


def test_the_memory_is_bounded_and_forgets_the_least_recently_used() -> None:
    memory = SessionTokens(capacity=10)
    memory.put("a", 1, array("i", range(4)))
    memory.put("b", 1, array("i", range(4)))
    assert memory.get("a", 1) == [0, 1, 2, 3]  # now the most recently used
    memory.put("c", 1, array("i", range(4)))  # 12 > 10: "b" goes
    assert memory.get("b", 1) is None
    assert memory.get("a", 1) == memory.get("c", 1) == [0, 1, 2, 3]
    memory.put("d", 1, array("i", range(11)))  # longer than the whole memory: not kept
    assert memory.get("d", 1) is None and memory.get("a", 1) is not None


def test_a_reader_beside_the_owner_remembers_nothing(store: Store, root) -> None:
    r1, s1, e1 = respond(store, "one")
    with Store(root, readonly=True) as reader:
        assert reader.session_tokens(s1, _end(store, r1)) == flat(e1)
        _empty_the_log(store)
        assert reader.session_tokens(s1, _end(store, r1)) == []

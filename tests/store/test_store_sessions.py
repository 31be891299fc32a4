"""Session logs: commit/read round trips, forks through ancestry, atomicity, reopen."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from jupyter_superfluid.store import (
    LATEST_VERSION,
    STORE_FILE,
    Event,
    NewResponse,
    NewSession,
    ResponseNotFound,
    SessionConflict,
    SessionNotFound,
    Store,
    StoreError,
    new_id,
)

from .helpers import Clock, events_for, flat, respond


def test_round_trip_exact_tokens(store: Store) -> None:
    extremes = (0, 1, 2**31 - 1, 151_643, 7)
    events = [
        Event("head", (9, 8, 7)),
        Event("input", extremes, {"type": "message", "role": "user", "content": "héllo ✓"}),
        Event("output", (), {"type": "reasoning", "content": []}),
    ]
    rid = new_id("resp")
    end = store.commit_turn(
        NewSession("sess_a", "tiny", meta={"head_hash": "abc", "renders_per_message": True}),
        events,
        NewResponse(rid, "tiny", "completed", {"id": rid}, cached_tokens=3, preview="héllo"),
    )
    assert end == 3
    assert store.session_events("sess_a") == events
    assert store.session_tokens("sess_a") == [9, 8, 7, *extremes]
    assert store.session_tokens("sess_a", end=1) == [9, 8, 7]
    info = store.get_session("sess_a")
    assert info is not None
    assert (info.model, info.length, info.parent_id, info.parent_len) == ("tiny", 3, None, 0)
    assert info.meta == {"head_hash": "abc", "renders_per_message": True}
    rec = store.get_response(rid)
    assert rec is not None
    assert (rec.session_id, rec.end, rec.body, rec.cached_tokens, rec.preview) == (
        "sess_a", 3, {"id": rid}, 3, "héllo"
    )  # fmt: skip


def test_fork_chain_depth_three_reads_through_ancestry(store: Store) -> None:
    r1, _s1, e1 = respond(store, "one")
    r2, _s2, e2 = respond(store, "two", previous=r1)
    r3, s3, e3 = respond(store, "three", previous=r2)
    r4, s4, e4 = respond(store, "four", previous=r3)
    assert store.session_events(s4) == e1 + e2 + e3 + e4
    assert store.session_tokens(s4) == flat(e1 + e2 + e3 + e4)
    # Only the new turn is stored in the fork; the rest is a reference.
    info = store.get_session(s4)
    assert info is not None and info.parent_id == s3 and info.parent_len == len(e1 + e2 + e3)
    rec = store.get_response(r4)
    assert rec is not None and rec.end == len(e1 + e2 + e3 + e4)
    # A prefix that ends inside a grand-ancestor.
    assert store.session_tokens(s4, end=len(e1) + 1) == flat(e1 + e2[:1])
    with sqlite3.connect(store.path) as conn:
        own = conn.execute("SELECT count(*) FROM events WHERE session_id = ?", (s4,)).fetchone()
    assert own[0] == len(e4)


def test_fork_in_the_middle_of_a_session(store: Store) -> None:
    _r1, s1, e1 = respond(store, "one")
    store.commit_turn(NewSession("sess_mid", "tiny", s1, 2), events_for("x"))
    assert store.session_events("sess_mid") == e1[:2] + events_for("x")


def test_branching_twice_gives_independent_sessions(store: Store) -> None:
    r1, s1, e1 = respond(store, "root")
    ra, sa, ea = respond(store, "branch a", previous=r1)
    rb, sb, eb = respond(store, "branch b", previous=r1)
    assert sa != sb
    assert store.session_tokens(sa) == flat(e1 + ea)
    assert store.session_tokens(sb) == flat(e1 + eb)
    assert store.session_tokens(s1) == flat(e1)  # the parent is untouched
    assert [c.id for c in store.children(r1)] == [ra, rb]


def test_unstored_turn_logs_events_without_record(store: Store) -> None:
    r1, _s1, e1 = respond(store, "kept")
    r2, s2, e2 = respond(store, "unstored", previous=r1, store_it=False)
    assert store.get_response(r2) is None
    assert store.session_tokens(s2) == flat(e1 + e2)
    assert [r.id for r in store.list_responses()] == [r1]


def test_append_to_existing_session_checks_expected_length(store: Store) -> None:
    store.commit_turn(NewSession("sess_x", "tiny"), events_for("a"))
    end = store.commit_turn(NewSession("sess_x", "tiny", expect_len=2), events_for("b"))
    assert end == 4
    with pytest.raises(SessionConflict):
        store.commit_turn(NewSession("sess_x", "tiny", expect_len=2), events_for("c"))
    assert store.session_events("sess_x") == events_for("a") + events_for("b")


def test_bad_fork_points_are_refused(store: Store) -> None:
    store.commit_turn(NewSession("sess_p", "tiny"), events_for("p"))
    with pytest.raises(SessionNotFound):
        store.commit_turn(NewSession("sess_q", "tiny", "sess_nope", 1), events_for("q"))
    with pytest.raises(SessionConflict):
        store.commit_turn(NewSession("sess_q", "tiny", "sess_p", 3), events_for("q"))
    with pytest.raises(SessionNotFound):
        store.session_events("sess_q")
    with pytest.raises(ValueError):
        store.session_tokens("sess_p", end=3)


def test_failure_inside_the_commit_leaves_nothing(store: Store) -> None:
    r1, s1, e1 = respond(store, "base")
    # A non-JSON item fails half-way through the events: the whole turn rolls back.
    bad = [*events_for("ok"), Event("output", (1, 2), {"x": object()})]
    rid = new_id("resp")
    with pytest.raises(TypeError):
        store.commit_turn(
            NewSession("sess_bad", "tiny", s1, len(e1)),
            bad,
            NewResponse(rid, "tiny", "completed", {}),
        )
    assert store.get_session("sess_bad") is None
    assert store.get_response(rid) is None
    # The record fails after every event was written: the events roll back too.
    with pytest.raises(sqlite3.IntegrityError):
        store.commit_turn(
            NewSession("sess_dup", "tiny"), events_for("d"), NewResponse(r1, "tiny", "x", {})
        )
    assert store.get_session("sess_dup") is None
    # The store still works after the failures.
    _r2, s2, e2 = respond(store, "after", previous=r1)
    assert store.session_tokens(s2) == flat(e1 + e2)


def test_continuing_a_response_deleted_meanwhile_is_refused(store: Store) -> None:
    r1, s1, e1 = respond(store, "base")
    assert store.delete_response(r1)
    with pytest.raises(ResponseNotFound):
        store.commit_turn(
            NewSession("sess_late", "tiny"),
            events_for("late"),
            NewResponse(new_id("resp"), "tiny", "completed", {}, previous_response_id=r1),
        )
    with pytest.raises(SessionNotFound):  # the warm path: its session was purged
        store.commit_turn(NewSession("sess_late", "tiny", s1, len(e1)), events_for("late"))
    assert store.get_session("sess_late") is None


def test_commit_survives_close_and_reopen(root: Path, clock: Clock) -> None:
    with Store(root, clock=clock) as first:
        r1, _s1, e1 = respond(first, "one")
        r2, s2, e2 = respond(first, "two", previous=r1)
    with Store(root, clock=clock) as again:
        assert again.session_tokens(s2) == flat(e1 + e2)
        rec = again.get_response(r2)
        assert rec is not None and rec.previous_response_id == r1
    assert (root / STORE_FILE).is_file()


def test_store_file_is_wal_with_schema_version(store: Store) -> None:
    with sqlite3.connect(store.path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("SELECT version FROM schema_version").fetchone()[0] == LATEST_VERSION


def test_newer_schema_is_refused(root: Path) -> None:
    Store(root).close()
    with sqlite3.connect(root / STORE_FILE) as conn:
        conn.execute("UPDATE schema_version SET version = ?", (LATEST_VERSION + 1,))
    with pytest.raises(StoreError, match="newer"):
        Store(root)


def test_closed_store_refuses_calls(root: Path) -> None:
    s = Store(root)
    s.close()
    with pytest.raises(StoreError):
        s.get_response("resp_x")


def test_commits_from_many_threads(store: Store) -> None:
    r0, _s0, e0 = respond(store, "root")
    results: dict[str, tuple[str, list[Event]]] = {}
    errors: list[BaseException] = []

    def worker(n: int) -> None:
        try:
            for i in range(10):
                rid, sid, ev = respond(store, f"t{n}-{i}", previous=r0)
                results[rid] = (sid, ev)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(results) == 60
    for sid, ev in results.values():
        assert store.session_tokens(sid) == flat(e0 + ev)
    assert len(store.list_responses(limit=100)) == 61

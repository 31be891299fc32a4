"""Stored responses: visibility, listing, chains, delete with purge/reroot/cascade."""

from __future__ import annotations

import sqlite3

import pytest

from jupyter_superfluid.store import (
    NewResponse,
    NewSession,
    ResponseNotFound,
    SessionNotFound,
    Store,
    hash_key,
)

from .helpers import Clock, events_for, flat, respond

ALICE = hash_key("alice-key")
BOB = hash_key("bob-key")


def _rows(store: Store, sql: str, *args: object) -> list[tuple]:
    with sqlite3.connect(store.path) as conn:
        return conn.execute(sql, args).fetchall()


def test_delete_hides_record_and_reroots_forks(store: Store) -> None:
    r1, s1, e1 = respond(store, "one")
    r2, s2, e2 = respond(store, "two", previous=r1)
    r3, s3, e3 = respond(store, "three", previous=r2)
    before = store.session_tokens(s3)
    assert store.delete_response(r2)
    assert store.get_response(r2) is None
    assert r2 not in [r.id for r in store.list_responses()]
    with pytest.raises(SessionNotFound):
        store.session_tokens(s2)
    # The fork keeps its exact tokens, now with its own copy of what it inherited
    # from the purged session, and refers to that session's parent instead.
    assert store.session_tokens(s3) == before == flat(e1 + e2 + e3)
    info = store.get_session(s3)
    assert info is not None and info.parent_id == s1 and info.parent_len == len(e1)
    assert store.session_events(s3) == e1 + e2 + e3
    # r2 is continued by r3: it stays, hidden, in the chain that rebuilds r3.
    assert [r.id for r in store.response_chain(r3)] == [r1, r2, r3]
    assert [r.deleted for r in store.response_chain(r3)] == [False, True, False]
    assert store.response_chain(r2) == []
    assert not store.delete_response(r2)  # already gone to every reader


def test_reroot_of_a_root_session_copies_everything(store: Store) -> None:
    r1, s1, e1 = respond(store, "one")
    _ra, sa, ea = respond(store, "a", previous=r1)
    rb, sb, eb = respond(store, "b", previous=r1)
    assert store.delete_response(r1)
    for sid, ev in ((sa, ea), (sb, eb)):
        info = store.get_session(sid)
        assert info is not None and info.parent_id is None and info.parent_len == 0
        assert store.session_tokens(sid) == flat(e1 + ev)
    # The purge is logical: the purged events are still in the file until vacuum.
    assert _rows(store, "SELECT count(*) FROM events WHERE session_id = ?", s1)[0][0] == len(e1)
    store.vacuum()
    assert _rows(store, "SELECT count(*) FROM events WHERE session_id = ?", s1)[0][0] == 0
    assert store.session_tokens(sa) == flat(e1 + ea)
    # r1 is still continued by ra and rb, so its (hidden) record and session row stay.
    assert [r.id for r in store.response_chain(rb)] == [r1, rb]


def test_deleting_the_leaf_removes_hidden_ancestors(store: Store) -> None:
    r1, _s1, e1 = respond(store, "one")
    r2, _s2, e2 = respond(store, "two", previous=r1)
    r3, s3, e3 = respond(store, "three", previous=r2)
    assert store.delete_response(r1)
    assert store.delete_response(r2)
    assert {r[0] for r in _rows(store, "SELECT id FROM responses")} == {r1, r2, r3}
    assert [r.id for r in store.response_chain(r3)] == [r1, r2, r3]
    assert store.session_tokens(s3) == flat(e1 + e2 + e3)
    assert store.delete_response(r3)
    assert _rows(store, "SELECT id FROM responses") == []
    store.vacuum()
    assert _rows(store, "SELECT count(*) FROM events")[0][0] == 0
    assert _rows(store, "SELECT count(*) FROM sessions")[0][0] == 0


def test_hidden_parent_stays_while_any_branch_continues_it(store: Store) -> None:
    r1, _, _ = respond(store, "one")
    ra, _, _ = respond(store, "a", previous=r1)
    rb, _, _ = respond(store, "b", previous=r1)
    store.delete_response(r1)
    store.delete_response(ra)
    assert [r[0] for r in _rows(store, "SELECT id FROM responses ORDER BY seq")] == [r1, rb]
    assert [r.id for r in store.children(r1, include_deleted=True)] == [rb]
    store.delete_response(rb)
    assert _rows(store, "SELECT id FROM responses") == []


def test_rebuilt_turns_chain_without_forking(store: Store) -> None:
    r1, _s1, e1 = respond(store, "one")
    r2, s2, e2 = respond(store, "two", previous=r1, fork=False)
    info = store.get_session(s2)
    assert info is not None and info.parent_id is None
    store.delete_response(r1)
    assert store.session_tokens(s2) == flat(e2)
    assert [r.output_items for r in store.response_chain(r2)] == [
        [e.item for e in e1 if e.kind == "output"],
        [e.item for e in e2 if e.kind == "output"],
    ]


def test_delete_keeps_session_another_live_record_ends_in(store: Store) -> None:
    respond(store, "one")
    # Two records in one session (an append, not a fork): deleting the first
    # must not purge events the second's conversation still needs.
    store.commit_turn(
        NewSession("sess_shared", "tiny"),
        events_for("a"),
        NewResponse("resp_a", "tiny", "completed", {}),
    )
    store.commit_turn(
        NewSession("sess_shared", "tiny", expect_len=2),
        events_for("b"),
        NewResponse("resp_b", "tiny", "completed", {}, previous_response_id="resp_a"),
    )
    assert store.delete_response("resp_a")
    assert store.session_tokens("sess_shared") == flat(events_for("a") + events_for("b"))
    assert store.delete_response("resp_b")
    with pytest.raises(SessionNotFound):
        store.session_tokens("sess_shared")


def test_principal_isolation(store: Store) -> None:
    ra, _, _ = respond(store, "alice", principal=ALICE)
    rb, _, _ = respond(store, "bob", principal=BOB)
    assert store.get_response(ra, ALICE) is not None
    assert store.get_response(ra, BOB) is None
    assert store.get_response(ra) is not None  # None: no isolation
    assert [r.id for r in store.list_responses(ALICE)] == [ra]
    assert [r.id for r in store.list_responses(BOB)] == [rb]
    assert [r.id for r in store.list_responses()] == [rb, ra]
    assert store.response_chain(ra, BOB) == []
    with pytest.raises(ResponseNotFound):
        store.list_responses(BOB, after=ra)
    assert not store.delete_response(ra, BOB)
    assert store.get_response(ra, ALICE) is not None
    assert store.delete_response(ra, ALICE)
    assert store.get_response(ra) is None
    assert store.get_response(rb, BOB) is not None


def test_listing_pagination_newest_first(store: Store, clock: Clock) -> None:
    ids = []
    for i in range(7):
        clock.advance(1)
        ids.append(respond(store, f"r{i}")[0])
    newest_first = ids[::-1]
    page1 = store.list_responses(limit=3)
    assert [r.id for r in page1] == newest_first[:3]
    page2 = store.list_responses(limit=3, after=page1[-1].id)
    assert [r.id for r in page2] == newest_first[3:6]
    page3 = store.list_responses(limit=3, after=page2[-1].id)
    assert [r.id for r in page3] == newest_first[6:]
    assert [r.id for r in store.list_responses(limit=4, order="asc")] == ids[:4]
    assert [r.id for r in store.list_responses(limit=10, after=ids[4], order="asc")] == ids[5:]
    # Deleted records drop out; a deleted cursor still pages on from its place.
    store.delete_response(ids[5])
    assert [r.id for r in store.list_responses(limit=3)] == [ids[6], ids[4], ids[3]]
    store.delete_response(ids[3])
    assert [r.id for r in store.list_responses(limit=2, after=ids[4])] == [ids[2], ids[1]]
    assert [r.created_at for r in store.list_responses(limit=2)] == [clock.now, clock.now - 2]
    with pytest.raises(ValueError):
        store.list_responses(order="sideways")  # type: ignore[arg-type]


def test_vacuum_drops_unreferenced_unstored_logs(store: Store, clock: Clock) -> None:
    r1, s1, e1 = respond(store, "kept")
    _, s2, e2 = respond(store, "unstored", previous=r1, store_it=False)
    _, s3, _ = respond(store, "unstored root", store_it=False)
    clock.advance(10)
    assert store.vacuum(unreferenced_before=clock.now - 20) == 0
    assert store.session_tokens(s2) == flat(e1 + e2)
    assert store.vacuum(unreferenced_before=clock.now, compact=True) > 0
    assert store.get_session(s2) is None and store.get_session(s3) is None
    assert store.session_tokens(s1) == flat(e1)


def test_deleting_parents_bottom_up_keeps_the_leaf_whole(store: Store) -> None:
    r1, s1, e1 = respond(store, "one")
    r2, s2, e2 = respond(store, "two", previous=r1)
    r3, s3, e3 = respond(store, "three", previous=r2)
    assert store.delete_response(r2)  # s3 copies e2, refers to s1
    assert store.delete_response(r1)  # s3 copies e1, refers to nothing
    info = store.get_session(s3)
    assert info is not None and (info.parent_id, info.parent_len) == (None, 0)
    store.vacuum()
    for sid in (s1, s2):
        assert _rows(store, "SELECT count(*) FROM events WHERE session_id = ?", sid)[0][0] == 0
    assert store.session_events(s3) == e1 + e2 + e3
    assert [r.id for r in store.response_chain(r3)] == [r1, r2, r3]

"""Idempotency-Key records: the claim state machine, expiry, crash recovery, atomic finish."""

from __future__ import annotations

from pathlib import Path

from jupyter_superfluid.store import (
    IdempotentResult,
    NewResponse,
    NewSession,
    Store,
    hash_key,
)

from .helpers import Clock, events_for

P = hash_key("k1")


def test_state_machine(store: Store) -> None:
    state, rec = store.begin_idempotent(P, "key-1", "h1")
    assert (state, rec.state, rec.result) == ("claimed", "in_progress", None)
    assert store.begin_idempotent(P, "key-1", "h1")[0] == "in_progress"
    assert store.begin_idempotent(P, "key-1", "h2")[0] == "conflict"
    result = {"status": 200, "headers": {"content-type": "application/json"}, "body": {"id": 1}}
    assert store.finish_idempotent(P, "key-1", result)
    state, rec = store.begin_idempotent(P, "key-1", "h1")
    assert (state, rec.state, rec.result) == ("done", "done", result)
    assert store.begin_idempotent(P, "key-1", "h2")[0] == "conflict"
    assert not store.finish_idempotent(P, "key-1", {"again": True})  # done stays done
    assert not store.abandon_idempotent(P, "key-1")
    got = store.get_idempotent(P, "key-1")
    assert got is not None and got.result == result


def test_keys_are_per_principal(store: Store) -> None:
    assert store.begin_idempotent(P, "same", "h1")[0] == "claimed"
    assert store.begin_idempotent(hash_key("k2"), "same", "h2")[0] == "claimed"
    assert store.begin_idempotent(None, "same", "h3")[0] == "claimed"
    assert store.begin_idempotent(None, "same", "h3")[0] == "in_progress"
    rec = store.get_idempotent(None, "same")
    assert rec is not None and rec.principal is None


def test_abandon_frees_the_key(store: Store) -> None:
    store.begin_idempotent(P, "k", "h1")
    assert store.abandon_idempotent(P, "k")
    assert store.get_idempotent(P, "k") is None
    assert store.begin_idempotent(P, "k", "h2")[0] == "claimed"  # a retry, even with a new body


def test_expiry_frees_the_key(root: Path, clock: Clock) -> None:
    with Store(root, clock=clock, idempotency_ttl=60) as store:
        store.begin_idempotent(P, "k", "h1")
        store.finish_idempotent(P, "k", {"n": 1})
        clock.advance(59)
        assert store.begin_idempotent(P, "k", "h2")[0] == "conflict"
        clock.advance(1)
        assert store.get_idempotent(P, "k") is None
        state, rec = store.begin_idempotent(P, "k", "h2")
        assert state == "claimed" and rec.expires_at == clock.now + 60
        store.begin_idempotent(P, "other", "h")
        clock.advance(61)
        assert store.prune_idempotency() == 2


def test_reopen_abandons_claims_of_the_previous_process(root: Path, clock: Clock) -> None:
    with Store(root, clock=clock) as first:
        first.begin_idempotent(P, "running", "h1")
        first.begin_idempotent(P, "finished", "h1")
        first.finish_idempotent(P, "finished", {"body": "x"})
    with Store(root, clock=clock) as second:
        assert second.recovered_claims == 1
        assert second.get_idempotent(P, "running") is None
        assert second.begin_idempotent(P, "running", "h1")[0] == "claimed"
        state, rec = second.begin_idempotent(P, "finished", "h1")
        assert (state, rec.result) == ("done", {"body": "x"})
        # A claim is only finished or abandoned by the process that holds it.
        second.begin_idempotent(P, "mine", "h")
    with Store(root, clock=clock) as third:
        assert not third.finish_idempotent(P, "mine", {})
        assert not third.abandon_idempotent(P, "mine")
        assert third.begin_idempotent(P, "mine", "h")[0] == "claimed"


def test_finish_commits_with_the_response(store: Store) -> None:
    store.begin_idempotent(P, "k", "h")
    result = {"status": 200, "response_id": "resp_1"}
    store.commit_turn(
        NewSession("sess_1", "tiny"),
        events_for("x"),
        NewResponse("resp_1", "tiny", "completed", {}, principal=P, protocol="lmsp"),
        idempotency=IdempotentResult(P, "k", result),
    )
    state, rec = store.begin_idempotent(P, "k", "h")
    assert (state, rec.result) == ("done", result)
    # The same, for a task: the 202 result is durable with the task it names.
    store.begin_idempotent(P, "t", "h")
    task = store.create_task({"model": "tiny"}, principal=P,
                             idempotency=IdempotentResult(P, "t", {"task": "x"}))  # fmt: skip
    assert store.get_task(task.id, P) is not None
    assert store.begin_idempotent(P, "t", "h")[0] == "done"

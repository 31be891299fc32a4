"""LMSP tasks: lifecycle, numbered events, retention, and recovery after a restart."""

from __future__ import annotations

from pathlib import Path

import pytest

from jupyter_superfluid.store import (
    RESTART_PROBLEM,
    EventHistoryExpired,
    Store,
    TaskNotFound,
    hash_key,
)

from .helpers import Clock

P = hash_key("k1")


def test_lifecycle_and_events(store: Store, clock: Clock) -> None:
    task = store.create_task({"model": "tiny", "input": "hi"}, principal=P)
    assert task.id.startswith("task_") and len(task.id) == 5 + 32
    assert (task.status, task.last_seq, task.final) == ("queued", 0, False)
    assert store.events_after(task.id) == []
    assert store.start_task(task.id, response_id="resp_1")
    assert not store.start_task(task.id)
    clock.advance(1)
    seq = store.append_task_events(
        task.id,
        [
            ("response.created", {"status": "in_progress"}),
            ("response.output_text.delta", {"d": "a"}),
        ],
    )
    assert seq == 2
    assert store.append_task_events(task.id, [("response.output_text.delta", {"d": "b"})]) == 3
    assert store.finish_task(task.id, "completed", ("response.completed", {"status": "completed"}))
    assert not store.finish_task(task.id, "cancelled", ("response.cancelled", {}))
    assert store.append_task_events(task.id, [("late", {})]) is None
    got = store.get_task(task.id, P)
    assert got is not None
    assert (got.status, got.response_id, got.last_seq, got.final) == (
        "completed",
        "resp_1",
        4,
        True,
    )
    assert got.request == {"model": "tiny", "input": "hi"}
    events = store.events_after(task.id, 0)
    assert [e.seq for e in events] == [1, 2, 3, 4]
    assert [e.event for e in events][-1] == "response.completed"
    assert events[1].data == {"d": "a"}
    assert [e.seq for e in store.events_after(task.id, 2)] == [3, 4]
    assert [e.seq for e in store.events_after(task.id, 1, limit=2)] == [2, 3]
    assert store.events_after(task.id, 4) == []


def test_isolation_and_unknown(store: Store) -> None:
    task = store.create_task({}, principal=P)
    assert store.get_task(task.id, hash_key("other")) is None
    assert store.get_task(task.id) is not None
    assert store.get_task("task_nope") is None
    with pytest.raises(TaskNotFound):
        store.events_after("task_nope", 0)
    with pytest.raises(ValueError):
        store.finish_task(task.id, "running", ("x", {}))


def test_retention_window(root: Path, clock: Clock) -> None:
    with Store(root, clock=clock, task_event_retention=100) as store:
        task = store.create_task({})
        store.append_task_events(task.id, [("a", 1), ("b", 2)])
        clock.advance(60)
        store.append_task_events(task.id, [("c", 3)])
        clock.advance(50)  # a and b are 110 s old, c is 50 s old
        assert store.oldest_retained_seq(task.id) == 3
        assert [e.seq for e in store.events_after(task.id, 2)] == [3]
        with pytest.raises(EventHistoryExpired) as info:
            store.events_after(task.id, 1)
        assert info.value.oldest_retained_seq == 3
        with pytest.raises(EventHistoryExpired):
            store.events_after(task.id, 0)
        assert store.prune_task_events() == 2
        assert store.oldest_retained_seq(task.id) == 3
        assert [e.seq for e in store.events_after(task.id, 2)] == [3]
        clock.advance(100)
        assert store.oldest_retained_seq(task.id) == 4  # all expired: last_seq + 1
        assert store.events_after(task.id, 3) == []
        with pytest.raises(EventHistoryExpired):
            store.events_after(task.id, 2)


def test_reopen_fails_unfinished_tasks_with_a_final_event(root: Path, clock: Clock) -> None:
    with Store(root, clock=clock) as first:
        queued = first.create_task({"n": 1}, principal=P)
        running = first.create_task({"n": 2}, principal=P, response_id="resp_r")
        first.start_task(running.id)
        first.append_task_events(running.id, [("response.created", {})], durable=False)
        done = first.create_task({"n": 3})
        first.finish_task(done.id, "completed", ("response.completed", {}))
    clock.advance(5)
    with Store(root, clock=clock) as second:
        assert second.recovered_tasks == 2
        for task_id, last in ((queued.id, 1), (running.id, 2)):
            task = second.get_task(task_id)
            assert task is not None
            assert (task.status, task.error, task.last_seq) == ("failed", RESTART_PROBLEM, last)
            final = second.events_after(task_id, last - 1)
            assert [e.event for e in final] == ["response.failed"]
            assert final[0].data["status"] == "failed"
            assert final[0].data["error"] == RESTART_PROBLEM
        task = second.get_task(running.id)
        assert task is not None and task.response_id == "resp_r"
        assert second.events_after(running.id)[-1].data["response_id"] == "resp_r"
        task = second.get_task(done.id)
        assert task is not None and task.status == "completed" and task.last_seq == 1
    with Store(root, clock=clock) as third:
        assert third.recovered_tasks == 0


def test_a_finished_task_keeps_its_result_past_retention(root: Path, clock: Clock) -> None:
    with Store(root, clock=clock, task_event_retention=10) as store:
        task = store.create_task({})
        assert store.get_task(task.id).result is None  # type: ignore[union-attr]
        result = {"id": "resp_1", "status": "completed", "output": []}
        store.finish_task(task.id, "completed", ("response.completed", {}), result=result)
        clock.advance(20)
        with pytest.raises(EventHistoryExpired):
            store.events_after(task.id, 0)
        assert store.get_task(task.id).result == result  # type: ignore[union-attr]

"""LMSP tasks and their numbered events.

A task moves queued → running → one final status. Its events are numbered
from 1 and appended as they happen; intermediate ones may be committed
without an fsync (``durable=False``), while ``finish_task`` writes the final
event and the final status in one durable transaction, so a task never shows
a final status without its final event.

Retention: events older than ``task_event_retention`` seconds are expired.
Expiry is decided at read time from ``created_at`` (kept non-decreasing per
task, so the retained events are always a suffix), which makes answers exact
whether or not ``prune_task_events`` has physically removed the rows yet.

A task that a previous process left queued or running can never finish: on
open the store marks it failed with ``RESTART_PROBLEM`` and appends a final
``response.failed`` event.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from typing import Any

from jupyter_superfluid.store.db import Database, dump_json, load_json
from jupyter_superfluid.store.idempotency import IdempotentResult, finish_in
from jupyter_superfluid.store.keys import new_id
from jupyter_superfluid.store.records import (
    FINAL_TASK_STATUSES,
    EventHistoryExpired,
    TaskEvent,
    TaskNotFound,
    TaskRecord,
)

DEFAULT_TASK_EVENT_RETENTION = 24 * 3600.0

RESTART_PROBLEM: dict[str, Any] = {
    "type": "about:blank",
    "title": "Server restarted",
    "status": 503,
    "detail": "The server restarted before this task finished; create the task again.",
    "code": "server_restarted",
}


def _to_task(row: sqlite3.Row) -> TaskRecord:
    return TaskRecord(
        id=row["id"],
        principal=row["principal"],
        status=row["status"],
        response_id=row["response_id"],
        request=load_json(row["request"]),
        error=load_json(row["error"]),
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        last_seq=row["last_seq"],
        result=load_json(row["result"]),
    )


def _append(
    conn: sqlite3.Connection, row: sqlite3.Row, events: Sequence[tuple[str, Any]], now: float
) -> int:
    # Timestamps never go backwards within a task, so retention keeps a suffix.
    at = max(now, row["last_event_at"])
    seq: int = row["last_seq"]
    rows = []
    for name, data in events:
        seq += 1
        rows.append((row["id"], seq, name, dump_json(data), at))
    conn.executemany(
        "INSERT INTO task_events (task_id, seq, event, data, created_at) VALUES (?, ?, ?, ?, ?)",
        rows,
    )
    conn.execute(
        "UPDATE tasks SET last_seq = ?, last_event_at = ? WHERE id = ?", (seq, at, row["id"])
    )
    return seq


def _finish(
    conn: sqlite3.Connection,
    row: sqlite3.Row,
    status: str,
    final_event: tuple[str, Any],
    error: Any,
    now: float,
    result: Any = None,
) -> None:
    _append(conn, row, [final_event], now)
    conn.execute(
        "UPDATE tasks SET status = ?, error = ?, result = ?, updated_at = ? WHERE id = ?",
        (
            status,
            None if error is None else dump_json(error),
            None if result is None else dump_json(result),
            now,
            row["id"],
        ),
    )


def recover_tasks(conn: sqlite3.Connection, boot_id: str, now: float) -> int:
    """Fail the queued or running tasks of earlier processes, each with a final event."""
    rows = conn.execute(
        "SELECT * FROM tasks WHERE status IN ('queued', 'running') AND boot_id != ?", (boot_id,)
    ).fetchall()
    for row in rows:
        data = {"response_id": row["response_id"], "status": "failed", "error": RESTART_PROBLEM}
        _finish(conn, row, "failed", ("response.failed", data), RESTART_PROBLEM, now)
    return len(rows)


class TasksMixin:
    """Task methods of ``Store``."""

    _db: Database
    _clock: Callable[[], float]
    boot_id: str
    task_event_retention: float

    def create_task(
        self,
        request: Any,
        *,
        principal: str | None = None,
        task_id: str | None = None,
        response_id: str | None = None,
        idempotency: IdempotentResult | None = None,
    ) -> TaskRecord:
        """Create a queued task (finishing an Idempotency-Key claim in the same commit)."""
        now = self._clock()
        task_id = task_id or new_id("task")
        with self._db.write() as conn:
            conn.execute(
                "INSERT INTO tasks (id, principal, status, response_id, request, boot_id,"
                " created_at, updated_at) VALUES (?, ?, 'queued', ?, ?, ?, ?, ?)",
                (task_id, principal, response_id, dump_json(request), self.boot_id, now, now),
            )
            if idempotency is not None:
                finish_in(conn, idempotency, self.boot_id)
            row = self._task_row(conn, task_id)
        return _to_task(row)

    def get_task(self, task_id: str, principal: str | None = None) -> TaskRecord | None:
        """The task, or None when unknown or another principal's (None: no isolation)."""
        with self._db.read() as conn:
            row = conn.execute("SELECT * FROM tasks WHERE id = ?", (task_id,)).fetchone()
        if row is None or (principal is not None and row["principal"] != principal):
            return None
        return _to_task(row)

    def start_task(self, task_id: str, *, response_id: str | None = None) -> bool:
        """queued → running (setting its response id when given); False if not queued."""
        with self._db.write() as conn:
            cur = conn.execute(
                "UPDATE tasks SET status = 'running', updated_at = ?,"
                " response_id = COALESCE(?, response_id) WHERE id = ? AND status = 'queued'",
                (self._clock(), response_id, task_id),
            )
            return cur.rowcount == 1

    def append_task_events(
        self, task_id: str, events: Sequence[tuple[str, Any]], *, durable: bool = True
    ) -> int | None:
        """Append (event, data) pairs; the last seq, or None once the task is final.

        ``durable=False`` skips the fsync (the events still survive a crash of the
        process, not of the machine); batch token deltas or pass it for them.
        """
        with self._db.write(durable=durable) as conn:
            row = self._task_row(conn, task_id)
            if row["status"] in FINAL_TASK_STATUSES:
                return None  # e.g. cancelled while the runner still produced deltas
            return _append(conn, row, events, self._clock()) if events else row["last_seq"]

    def finish_task(
        self,
        task_id: str,
        status: str,
        final_event: tuple[str, Any],
        *,
        error: Any = None,
        response_id: str | None = None,
        result: Any = None,
    ) -> bool:
        """Append the final event and set a final status (and result) durably; False if final."""
        if status not in FINAL_TASK_STATUSES:
            raise ValueError(f"{status!r} is not a final task status")
        with self._db.write() as conn:
            row = self._task_row(conn, task_id)
            if row["status"] in FINAL_TASK_STATUSES:
                return False
            if response_id is not None:
                conn.execute(
                    "UPDATE tasks SET response_id = ? WHERE id = ?", (response_id, task_id)
                )
            _finish(conn, row, status, final_event, error, self._clock(), result)
            return True

    def events_after(
        self, task_id: str, after_seq: int = 0, *, limit: int | None = None
    ) -> list[TaskEvent]:
        """Retained events with seq > after_seq; EventHistoryExpired if some were pruned."""
        with self._db.read() as conn:
            row = self._task_row(conn, task_id)
            oldest = self._oldest(conn, row)
            if max(after_seq, 0) + 1 < oldest:
                raise EventHistoryExpired(task_id, oldest)
            rows = conn.execute(
                "SELECT * FROM task_events WHERE task_id = ? AND seq > ? AND seq >= ?"
                " ORDER BY seq LIMIT ?",
                (task_id, after_seq, oldest, -1 if limit is None else limit),
            ).fetchall()
        return [
            TaskEvent(r["task_id"], r["seq"], r["event"], load_json(r["data"]), r["created_at"])
            for r in rows
        ]

    def oldest_retained_seq(self, task_id: str) -> int:
        """The seq of the oldest event still retained (last_seq + 1 when none is)."""
        with self._db.read() as conn:
            return self._oldest(conn, self._task_row(conn, task_id))

    def prune_task_events(self) -> int:
        """Physically remove events past the retention window; return how many went."""
        cutoff = self._clock() - self.task_event_retention
        with self._db.write(durable=False) as conn:
            return conn.execute("DELETE FROM task_events WHERE created_at < ?", (cutoff,)).rowcount

    def _oldest(self, conn: sqlite3.Connection, row: sqlite3.Row) -> int:
        cutoff = self._clock() - self.task_event_retention
        found = conn.execute(
            "SELECT min(seq) FROM task_events WHERE task_id = ? AND created_at >= ?",
            (row["id"], cutoff),
        ).fetchone()[0]
        return int(found) if found is not None else int(row["last_seq"]) + 1

    @staticmethod
    def _task_row(conn: sqlite3.Connection, task_id: str) -> sqlite3.Row:
        row: sqlite3.Row | None = conn.execute(
            "SELECT * FROM tasks WHERE id = ?", (task_id,)
        ).fetchone()
        if row is None:
            raise TaskNotFound(task_id)
        return row

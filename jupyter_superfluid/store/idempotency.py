"""LMSP Idempotency-Key records: claim, finish, abandon, expire.

One record per (principal, key). ``begin_idempotent`` claims a key atomically,
so two concurrent requests with one key cannot both run. A claim remembers the
process (boot id) that made it: only that process may finish or abandon it,
and a store opened by a later process abandons the claims of earlier ones (the
work they stood for died with them), so a crash never blocks a key for good.
Records expire ``ttl`` seconds after their claim; an expired key is free again.

The record's ``result`` is opaque JSON chosen by the protocol layer (status
code, replayed headers, the body or the id of what was created, the SSE events
of a stream). It can also be written in the same transaction as what it
describes: see ``IdempotentResult`` and ``Store.commit_turn``/``create_task``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from jupyter_superfluid.store.db import Database, dump_json, load_json
from jupyter_superfluid.store.records import ClaimState, IdempotencyRecord

DEFAULT_IDEMPOTENCY_TTL = 24 * 3600.0


@dataclass(frozen=True)
class IdempotentResult:
    """The result that finishes an Idempotency-Key claim, written with what it describes."""

    principal: str | None
    key: str
    result: Any


def _principal_col(principal: str | None) -> str:
    # '' stands for "no principal" so the (principal, key) primary key stays unique
    # (SQL NULLs never collide); a key hash is hex and is never empty.
    return "" if principal is None else principal


def _to_record(row: sqlite3.Row) -> IdempotencyRecord:
    return IdempotencyRecord(
        principal=row["principal"] or None,
        key=row["key"],
        body_hash=row["body_hash"],
        state=row["state"],
        result=load_json(row["result"]),
        created_at=row["created_at"],
        expires_at=row["expires_at"],
    )


def finish_in(conn: sqlite3.Connection, done: IdempotentResult, boot_id: str) -> bool:
    """Mark this process's claim done with its result, inside the caller's transaction."""
    cur = conn.execute(
        "UPDATE idempotency SET state = 'done', result = ?"
        " WHERE principal = ? AND key = ? AND state = 'in_progress' AND boot_id = ?",
        (dump_json(done.result), _principal_col(done.principal), done.key, boot_id),
    )
    return cur.rowcount == 1


def recover_idempotency(conn: sqlite3.Connection, boot_id: str, now: float) -> int:
    """Free claims left in progress by earlier processes and expired records; count them."""
    cur = conn.execute(
        "DELETE FROM idempotency WHERE (state = 'in_progress' AND boot_id != ?) OR expires_at <= ?",
        (boot_id, now),
    )
    return cur.rowcount


class IdempotencyMixin:
    """Idempotency-Key methods of ``Store``."""

    _db: Database
    _clock: Callable[[], float]
    boot_id: str
    idempotency_ttl: float

    def begin_idempotent(
        self, principal: str | None, key: str, body_hash: str
    ) -> tuple[ClaimState, IdempotencyRecord]:
        """Claim a key: ('claimed'|'in_progress'|'done'|'conflict', the record as it is)."""
        now = self._clock()
        pcol = _principal_col(principal)
        with self._db.write(durable=False) as conn:
            row = conn.execute(
                "SELECT * FROM idempotency WHERE principal = ? AND key = ?", (pcol, key)
            ).fetchone()
            if row is not None and row["expires_at"] <= now:
                conn.execute("DELETE FROM idempotency WHERE principal = ? AND key = ?", (pcol, key))
                row = None
            if row is None:
                conn.execute(
                    "INSERT INTO idempotency (principal, key, body_hash, state, boot_id,"
                    " created_at, expires_at) VALUES (?, ?, ?, 'in_progress', ?, ?, ?)",
                    (pcol, key, body_hash, self.boot_id, now, now + self.idempotency_ttl),
                )
                row = conn.execute(
                    "SELECT * FROM idempotency WHERE principal = ? AND key = ?", (pcol, key)
                ).fetchone()
                return "claimed", _to_record(row)
        record = _to_record(row)
        if record.body_hash != body_hash:
            return "conflict", record
        return record.state, record

    def finish_idempotent(self, principal: str | None, key: str, result: Any) -> bool:
        """Store the result of this process's claim; False when it holds no such claim."""
        with self._db.write() as conn:
            return finish_in(conn, IdempotentResult(principal, key, result), self.boot_id)

    def abandon_idempotent(self, principal: str | None, key: str) -> bool:
        """Release this process's claim after a failure, so a retry can run."""
        with self._db.write(durable=False) as conn:
            cur = conn.execute(
                "DELETE FROM idempotency"
                " WHERE principal = ? AND key = ? AND state = 'in_progress' AND boot_id = ?",
                (_principal_col(principal), key, self.boot_id),
            )
            return cur.rowcount == 1

    def get_idempotent(self, principal: str | None, key: str) -> IdempotencyRecord | None:
        """The unexpired record of a key, or None."""
        with self._db.read() as conn:
            row = conn.execute(
                "SELECT * FROM idempotency WHERE principal = ? AND key = ? AND expires_at > ?",
                (_principal_col(principal), key, self._clock()),
            ).fetchone()
        return None if row is None else _to_record(row)

    def prune_idempotency(self) -> int:
        """Delete expired records; return how many went."""
        with self._db.write(durable=False) as conn:
            cur = conn.execute("DELETE FROM idempotency WHERE expires_at <= ?", (self._clock(),))
            return cur.rowcount

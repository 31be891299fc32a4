"""Stored responses on a connection: insert, visibility, chains, listing and delete.

Visibility: a record is visible to ``principal`` when it is not deleted and
either ``principal`` is None (no isolation: every record is shared) or it
equals the record's principal. A deleted record that a remaining record still
continues (``previous_response_id``) stays on disk, hidden, because that
record's history is rebuilt from it; it is removed as soon as nothing
continues it, and the removal cascades up the chain.

Every function here runs inside a transaction the caller holds.
"""

from __future__ import annotations

import sqlite3
from typing import Literal

from jupyter_superfluid.store.db import dump_json, load_json
from jupyter_superfluid.store.log import live_session, purge_session
from jupyter_superfluid.store.records import (
    NewResponse,
    ResponseNotFound,
    ResponseRecord,
    SessionNotFound,
)

_CHAIN = """
WITH RECURSIVE chain(id, prev, depth) AS (
    SELECT id, previous_response_id, 0 FROM responses WHERE id = ?
    UNION ALL
    SELECT r.id, r.previous_response_id, chain.depth + 1
    FROM responses AS r JOIN chain ON r.id = chain.prev
)
SELECT responses.* FROM chain JOIN responses ON responses.id = chain.id ORDER BY chain.depth DESC
"""


def to_record(row: sqlite3.Row) -> ResponseRecord:
    """A responses row as a ResponseRecord."""
    return ResponseRecord(
        id=row["id"],
        model=row["model"],
        session_id=row["session_id"],
        end=row["end_idx"],
        status=row["status"],
        body=load_json(row["body"]),
        input_items=load_json(row["input_items"]),
        output_items=load_json(row["output_items"]),
        previous_response_id=row["previous_response_id"],
        principal=row["principal"],
        protocol=row["protocol"],
        created_at=row["created_at"],
        cached_tokens=row["cached_tokens"],
        preview=row["preview"],
        deleted=bool(row["deleted"]),
    )


def fetch(conn: sqlite3.Connection, response_id: str) -> sqlite3.Row | None:
    """The row of a response, deleted or not."""
    row: sqlite3.Row | None = conn.execute(
        "SELECT * FROM responses WHERE id = ?", (response_id,)
    ).fetchone()
    return row


def is_visible(row: sqlite3.Row | None, principal: str | None) -> bool:
    """Whether a row is live and readable by ``principal`` (None: no isolation)."""
    if row is None or row["deleted"]:
        return False
    return principal is None or row["principal"] == principal


def insert(
    conn: sqlite3.Connection, response: NewResponse, session_id: str, end: int, now: float
) -> None:
    """Insert a response record that ends at event ``end`` of ``session_id``."""
    prev_id = response.previous_response_id
    if prev_id is not None:
        prev = fetch(conn, prev_id)
        if prev is None or prev["deleted"]:
            # Deleted while this turn ran: refuse rather than resurrect it.
            raise ResponseNotFound(prev_id)
    if live_session(conn, session_id) is None:
        raise SessionNotFound(session_id)
    conn.execute(
        "INSERT INTO responses (id, model, session_id, end_idx, previous_response_id,"
        " principal, status, protocol, created_at, body, input_items, output_items,"
        " cached_tokens, preview) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            response.id, response.model, session_id, end, prev_id, response.principal,
            response.status, response.protocol,
            now if response.created_at is None else response.created_at,
            dump_json(response.body), dump_json(list(response.input_items)),
            dump_json(list(response.output_items)), response.cached_tokens, response.preview,
        ),
    )  # fmt: skip


def chain(conn: sqlite3.Connection, response_id: str) -> list[ResponseRecord]:
    """The records from the root of a conversation to ``response_id``, hidden ones included."""
    return [to_record(row) for row in conn.execute(_CHAIN, (response_id,))]


def page(
    conn: sqlite3.Connection,
    principal: str | None,
    limit: int,
    after: str | None,
    order: Literal["asc", "desc"],
) -> list[ResponseRecord]:
    """Up to ``limit`` visible records in commit order, past the cursor ``after``."""
    if order not in ("asc", "desc"):
        raise ValueError(f"order must be asc or desc, not {order!r}")
    where, params = ["deleted = 0"], []
    if principal is not None:
        where.append("principal = ?")
        params.append(principal)
    if after is not None:
        cursor = fetch(conn, after)  # a cursor may since have been deleted (hidden)
        if cursor is None or (principal is not None and cursor["principal"] != principal):
            raise ResponseNotFound(after)
        where.append("seq < ?" if order == "desc" else "seq > ?")
        params.append(cursor["seq"])
    sql = (
        f"SELECT * FROM responses WHERE {' AND '.join(where)} ORDER BY seq {order.upper()} LIMIT ?"
    )
    return [to_record(row) for row in conn.execute(sql, (*params, max(0, limit)))]


def children(
    conn: sqlite3.Connection, response_id: str, principal: str | None, include_deleted: bool
) -> list[ResponseRecord]:
    """Records that continue ``response_id``, oldest first."""
    rows = conn.execute(
        "SELECT * FROM responses WHERE previous_response_id = ? ORDER BY seq", (response_id,)
    ).fetchall()
    return [
        to_record(row)
        for row in rows
        if (include_deleted or not row["deleted"])
        and (principal is None or row["principal"] == principal)
    ]


def delete(conn: sqlite3.Connection, response_id: str, principal: str | None) -> bool:
    """Delete a visible record: hide it, purge its session, drop what nothing continues."""
    row = fetch(conn, response_id)
    if not is_visible(row, principal):
        return False
    assert row is not None
    conn.execute("UPDATE responses SET deleted = 1 WHERE id = ?", (response_id,))
    # Another live record may end in the same session (an append, not a fork):
    # its conversation still needs the events, so the session stays.
    shared = conn.execute(
        "SELECT 1 FROM responses WHERE session_id = ? AND deleted = 0 LIMIT 1",
        (row["session_id"],),
    ).fetchone()
    if shared is None:
        purge_session(conn, row["session_id"])
    _remove_unneeded(conn, response_id)
    return True


def _remove_unneeded(conn: sqlite3.Connection, response_id: str | None) -> None:
    # Walk up: a deleted record with no continuation goes, which may free its parent.
    while response_id is not None:
        row = fetch(conn, response_id)
        if row is None or not row["deleted"]:
            return
        if conn.execute(
            "SELECT 1 FROM responses WHERE previous_response_id = ? LIMIT 1", (response_id,)
        ).fetchone():
            return
        conn.execute("DELETE FROM responses WHERE id = ?", (response_id,))
        response_id = row["previous_response_id"]

"""Session logs on a connection: create, append, read through forks, purge and reroot.

A session owns the events from index ``parent_len`` on; the first ``parent_len``
events are its parent's (through the parent's own ancestry). Indexes are
absolute within the conversation, so a reroot copies rows verbatim and a read
is a handful of range scans, one per ancestor that contributes.

Every function here runs inside a transaction the caller holds.
"""

from __future__ import annotations

import sqlite3
from array import array
from collections.abc import Sequence
from typing import Any

from jupyter_superfluid.store.db import (
    dump_json,
    load_json,
    new_token_array,
    pack_tokens,
    unpack_tokens,
)
from jupyter_superfluid.store.records import (
    Event,
    NewSession,
    SessionConflict,
    SessionInfo,
    SessionNotFound,
    StoreError,
)

_ANCESTRY = """
WITH RECURSIVE anc(id, parent_id, parent_len, purged, depth) AS (
    SELECT id, parent_id, parent_len, purged, 0 FROM sessions WHERE id = ?
    UNION ALL
    SELECT s.id, s.parent_id, s.parent_len, s.purged, anc.depth + 1
    FROM sessions AS s JOIN anc ON s.id = anc.parent_id
)
SELECT id, parent_len, purged FROM anc ORDER BY depth
"""


def live_session(conn: sqlite3.Connection, session_id: str) -> sqlite3.Row | None:
    """The session's row, or None when it is unknown or purged."""
    row: sqlite3.Row | None = conn.execute(
        "SELECT * FROM sessions WHERE id = ? AND purged = 0", (session_id,)
    ).fetchone()
    return row


def session_info(row: sqlite3.Row) -> SessionInfo:
    """A sessions row as a SessionInfo."""
    return SessionInfo(
        id=row["id"],
        model=row["model"],
        parent_id=row["parent_id"],
        parent_len=row["parent_len"],
        length=row["length"],
        meta=load_json(row["meta"]),
        created_at=row["created_at"],
    )


def segments(
    conn: sqlite3.Connection, session_id: str, end: int | None
) -> list[tuple[str, int, int]]:
    """(session, start, stop) index ranges that make up events [0, end), root first."""
    row = live_session(conn, session_id)
    if row is None:
        raise SessionNotFound(session_id)
    hi = row["length"] if end is None else end
    if not 0 <= hi <= row["length"]:
        raise ValueError(f"end {end} outside session {session_id} of {row['length']} events")
    spans: list[tuple[str, int, int]] = []
    for anc in conn.execute(_ANCESTRY, (session_id,)):
        if hi <= 0:
            break
        if anc["purged"]:
            # Purging reroots every fork first, so a live session never reaches one.
            raise StoreError(f"session {session_id} inherits from purged {anc['id']}")
        if hi > anc["parent_len"]:
            spans.append((anc["id"], anc["parent_len"], hi))
        hi = min(hi, anc["parent_len"])
    spans.reverse()
    return spans


def read_events(conn: sqlite3.Connection, session_id: str, end: int | None) -> list[Event]:
    """Events [0, end) of a session, walking its ancestry."""
    events: list[Event] = []
    for sid, lo, hi in segments(conn, session_id, end):
        for row in conn.execute(
            "SELECT kind, item, tokens FROM events"
            " WHERE session_id = ? AND idx >= ? AND idx < ? ORDER BY idx",
            (sid, lo, hi),
        ):
            tokens = tuple(unpack_tokens(row["tokens"]))
            events.append(Event(row["kind"], tokens, load_json(row["item"])))
    return events


def read_tokens(conn: sqlite3.Connection, session_id: str, end: int | None) -> array[int]:
    """Token ids of events [0, end) of a session, concatenated."""
    out = new_token_array()
    for sid, lo, hi in segments(conn, session_id, end):
        for row in conn.execute(
            "SELECT tokens FROM events WHERE session_id = ? AND idx >= ? AND idx < ? ORDER BY idx",
            (sid, lo, hi),
        ):
            unpack_tokens(row["tokens"], into=out)
    return out


def ensure_session(conn: sqlite3.Connection, session: NewSession, now: float) -> int:
    """Create the session if new (checking its fork point); return its current length."""
    row = conn.execute("SELECT * FROM sessions WHERE id = ?", (session.id,)).fetchone()
    if row is not None:
        if row["purged"]:
            raise SessionNotFound(session.id)
        if session.expect_len is not None and row["length"] != session.expect_len:
            raise SessionConflict(
                f"session {session.id} has {row['length']} events, not {session.expect_len}"
            )
        return int(row["length"])
    parent_id, parent_len = session.parent_id, session.parent_len
    if parent_id is None and parent_len != 0:
        raise ValueError("parent_len needs a parent_id")
    if parent_id is not None:
        parent = live_session(conn, parent_id)
        if parent is None:
            raise SessionNotFound(parent_id)
        if not 0 <= parent_len <= parent["length"]:
            raise SessionConflict(f"fork at {parent_len} outside {parent_id}")
        if parent_len == 0:
            parent_id = None  # inherits nothing: no reference to keep
    if session.expect_len is not None and session.expect_len != parent_len:
        raise SessionConflict(f"new session {session.id} starts at {parent_len}")
    conn.execute(
        "INSERT INTO sessions (id, model, parent_id, parent_len, length, meta, created_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)",
        (session.id, session.model, parent_id, parent_len, parent_len,
         dump_json(dict(session.meta)), now),
    )  # fmt: skip
    return parent_len


def append_events(
    conn: sqlite3.Connection, session_id: str, start: int, events: Sequence[Event]
) -> int:
    """Append events at index ``start``; return the session's new length."""
    rows: list[tuple[Any, ...]] = []
    for offset, event in enumerate(events):
        item = None if event.item is None else dump_json(event.item)
        rows.append((session_id, start + offset, event.kind, item, pack_tokens(event.tokens)))
    conn.executemany(
        "INSERT INTO events (session_id, idx, kind, item, tokens) VALUES (?, ?, ?, ?, ?)", rows
    )
    end = start + len(rows)
    conn.execute("UPDATE sessions SET length = ? WHERE id = ?", (end, session_id))
    return end


def purge_session(conn: sqlite3.Connection, session_id: str) -> None:
    """Purge a session logically, first rerooting every fork of it."""
    row = live_session(conn, session_id)
    if row is None:
        return
    forks = conn.execute("SELECT * FROM sessions WHERE parent_id = ?", (session_id,)).fetchall()
    for fork in forks:
        _reroot(conn, fork, row)
    # A purged log is never read again: drop its own parent reference too, so
    # that it does not pin its parent's row when that is purged and vacuumed.
    conn.execute(
        "UPDATE sessions SET purged = 1, parent_id = NULL, parent_len = 0 WHERE id = ?",
        (session_id,),
    )


def _reroot(conn: sqlite3.Connection, fork: sqlite3.Row, parent: sqlite3.Row) -> None:
    # The fork copies the events it inherits from the parent's own part, then
    # refers to the parent's parent (live, or the parent would have been
    # rerooted when it was purged). Its full token list is unchanged.
    inherit, parent_start = fork["parent_len"], parent["parent_len"]
    if inherit > parent_start:
        conn.execute(
            "INSERT INTO events (session_id, idx, kind, item, tokens)"
            " SELECT ?, idx, kind, item, tokens FROM events"
            " WHERE session_id = ? AND idx >= ? AND idx < ?",
            (fork["id"], parent["id"], parent_start, inherit),
        )
    new_len = min(inherit, parent_start)
    new_parent = parent["parent_id"] if new_len > 0 else None
    conn.execute(
        "UPDATE sessions SET parent_id = ?, parent_len = ? WHERE id = ?",
        (new_parent, new_len, fork["id"]),
    )


def drop_purged(conn: sqlite3.Connection) -> int:
    """Physically remove purged sessions' events (and rows nothing refers to); count rows."""
    cur = conn.execute(
        "DELETE FROM events WHERE session_id IN (SELECT id FROM sessions WHERE purged = 1)"
    )
    removed = cur.rowcount
    cur = conn.execute(
        "DELETE FROM sessions WHERE purged = 1"
        " AND id NOT IN (SELECT session_id FROM responses)"
        " AND id NOT IN (SELECT parent_id FROM sessions WHERE parent_id IS NOT NULL)"
    )
    return removed + cur.rowcount


def drop_unreferenced(conn: sqlite3.Connection, before: float) -> int:
    """Remove logs no response or fork refers to, created before ``before``; count sessions."""
    total = 0
    while True:  # removing a fork can leave its parent unreferenced in turn
        ids = [
            r[0]
            for r in conn.execute(
                "SELECT id FROM sessions AS s WHERE created_at < ?"
                " AND NOT EXISTS (SELECT 1 FROM responses WHERE session_id = s.id)"
                " AND NOT EXISTS (SELECT 1 FROM sessions WHERE parent_id = s.id)",
                (before,),
            )
        ]
        if not ids:
            return total
        conn.executemany("DELETE FROM events WHERE session_id = ?", [(i,) for i in ids])
        conn.executemany("DELETE FROM sessions WHERE id = ?", [(i,) for i in ids])
        total += len(ids)

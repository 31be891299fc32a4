"""The store's SQLite schema and its forward-only migrations.

``schema_version`` holds one row with the version the file is at. Opening a
file runs, in one transaction, every migration above that version; a file
written by a newer version of this package is refused rather than guessed at.
A migration is a list of statements so that it runs inside the transaction
(``executescript`` would commit first).

Version 1 tables (see the module docstring of ``store`` for what they mean):

- ``sessions``: header of each session log; a fork names its parent and how
  many of the parent's events (through its own ancestry) it inherits.
- ``events``: the events a session owns, at their absolute index in the
  conversation (a fork's first own event has index ``parent_len``), with token
  ids as packed little-endian int32.
- ``responses``: stored responses; ``seq`` orders them for listing.
- ``idempotency``: LMSP Idempotency-Key records per principal.
- ``tasks`` and ``task_events``: LMSP tasks and their numbered events.

Later versions are described where they are defined, below.
"""

from __future__ import annotations

import sqlite3

from jupyter_superfluid.store.records import StoreError

V1: list[str] = [
    """CREATE TABLE sessions (
        id TEXT PRIMARY KEY,
        model TEXT NOT NULL,
        parent_id TEXT REFERENCES sessions(id),
        parent_len INTEGER NOT NULL DEFAULT 0 CHECK (parent_len >= 0),
        length INTEGER NOT NULL DEFAULT 0,
        meta TEXT NOT NULL DEFAULT '{}',
        created_at REAL NOT NULL,
        purged INTEGER NOT NULL DEFAULT 0,
        CHECK (parent_id IS NOT NULL OR parent_len = 0),
        CHECK (length >= parent_len)
    )""",
    "CREATE INDEX sessions_parent ON sessions(parent_id) WHERE parent_id IS NOT NULL",
    """CREATE TABLE events (
        session_id TEXT NOT NULL REFERENCES sessions(id),
        idx INTEGER NOT NULL CHECK (idx >= 0),
        kind TEXT NOT NULL CHECK (kind IN ('head', 'input', 'output')),
        item TEXT,
        tokens BLOB NOT NULL,
        PRIMARY KEY (session_id, idx)
    ) WITHOUT ROWID""",
    """CREATE TABLE responses (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        id TEXT NOT NULL UNIQUE,
        model TEXT NOT NULL,
        session_id TEXT NOT NULL REFERENCES sessions(id),
        end_idx INTEGER NOT NULL CHECK (end_idx >= 0),
        previous_response_id TEXT REFERENCES responses(id),
        principal TEXT,
        status TEXT NOT NULL,
        protocol TEXT NOT NULL CHECK (protocol IN ('openai', 'lmsp')),
        created_at REAL NOT NULL,
        body TEXT NOT NULL,
        input_items TEXT NOT NULL,
        output_items TEXT NOT NULL,
        cached_tokens INTEGER NOT NULL DEFAULT 0,
        preview TEXT NOT NULL DEFAULT '',
        deleted INTEGER NOT NULL DEFAULT 0
    )""",
    "CREATE INDEX responses_listing ON responses(principal, deleted, seq)",
    "CREATE INDEX responses_live ON responses(deleted, seq)",
    "CREATE INDEX responses_session ON responses(session_id)",
    """CREATE INDEX responses_previous ON responses(previous_response_id)
        WHERE previous_response_id IS NOT NULL""",
    """CREATE TABLE idempotency (
        principal TEXT NOT NULL,
        key TEXT NOT NULL,
        body_hash TEXT NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('in_progress', 'done')),
        result TEXT,
        boot_id TEXT NOT NULL,
        created_at REAL NOT NULL,
        expires_at REAL NOT NULL,
        PRIMARY KEY (principal, key)
    ) WITHOUT ROWID""",
    "CREATE INDEX idempotency_expiry ON idempotency(expires_at)",
    """CREATE TABLE tasks (
        id TEXT PRIMARY KEY,
        principal TEXT,
        status TEXT NOT NULL CHECK (status IN
            ('queued', 'running', 'completed', 'incomplete', 'failed', 'cancelled')),
        response_id TEXT,
        request TEXT NOT NULL,
        error TEXT,
        boot_id TEXT NOT NULL,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        last_seq INTEGER NOT NULL DEFAULT 0,
        last_event_at REAL NOT NULL DEFAULT 0
    )""",
    "CREATE INDEX tasks_live ON tasks(status) WHERE status IN ('queued', 'running')",
    """CREATE TABLE task_events (
        task_id TEXT NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
        seq INTEGER NOT NULL CHECK (seq >= 1),
        event TEXT NOT NULL,
        data TEXT NOT NULL,
        created_at REAL NOT NULL,
        PRIMARY KEY (task_id, seq)
    ) WITHOUT ROWID""",
    "CREATE INDEX task_events_age ON task_events(created_at)",
]

# Version 2: a finished task keeps its final result (the LMSP response object), which
# outlives the retention window of its events.
V2: list[str] = ["ALTER TABLE tasks ADD COLUMN result TEXT"]

# Version 3: the models added or removed at run time (``served_models``), so that the
# served set outlives a restart.
V3: list[str] = [
    """CREATE TABLE served_models (
        id TEXT PRIMARY KEY,
        spec TEXT,
        seq INTEGER NOT NULL,
        updated_at REAL NOT NULL
    )"""
]

# Version 4: conversations (``conv_…``), a moving head over the stored responses, the
# items of the branch it is on in order (pending ones have no response yet), and every
# response created in it, on any branch.
V4: list[str] = [
    """CREATE TABLE conversations (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        id TEXT NOT NULL UNIQUE,
        principal TEXT,
        metadata TEXT NOT NULL DEFAULT '{}',
        title TEXT NOT NULL DEFAULT '',
        head_response_id TEXT,  -- no foreign key: a deleted head only ends warm continuing
        head_valid INTEGER NOT NULL DEFAULT 1,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        deleted INTEGER NOT NULL DEFAULT 0
    )""",
    "CREATE INDEX conversations_listing ON conversations(principal, deleted, updated_at)",
    """CREATE TABLE conversation_items (
        conversation_id TEXT NOT NULL REFERENCES conversations(id),
        pos INTEGER NOT NULL CHECK (pos >= 0),
        id TEXT NOT NULL,
        item TEXT NOT NULL,
        response_id TEXT,
        deleted INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (conversation_id, pos)
    ) WITHOUT ROWID""",
    "CREATE INDEX conversation_items_id ON conversation_items(conversation_id, id)",
    """CREATE TABLE conversation_responses (
        conversation_id TEXT NOT NULL REFERENCES conversations(id),
        response_id TEXT NOT NULL,
        PRIMARY KEY (conversation_id, response_id)
    ) WITHOUT ROWID""",
]

# Append (version, statements) pairs; never edit a released one.
MIGRATIONS: list[tuple[int, list[str]]] = [(1, V1), (2, V2), (3, V3), (4, V4)]
LATEST_VERSION = MIGRATIONS[-1][0]


def schema_version(conn: sqlite3.Connection) -> int:
    """The version a store file is at (0 for a new, empty file)."""
    conn.execute(
        "CREATE TABLE IF NOT EXISTS schema_version"
        " (id INTEGER PRIMARY KEY CHECK (id = 1), version INTEGER NOT NULL)"
    )
    row = conn.execute("SELECT version FROM schema_version WHERE id = 1").fetchone()
    return int(row[0]) if row else 0


def migrate(conn: sqlite3.Connection) -> int:
    """Bring a store file up to ``LATEST_VERSION`` in one transaction; return the version."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        current = schema_version(conn)
        if current > LATEST_VERSION:
            raise StoreError(
                f"store schema version {current} is newer than this package's {LATEST_VERSION}"
            )
        for version, statements in MIGRATIONS:
            if version > current:
                for statement in statements:
                    conn.execute(statement)
        conn.execute(
            "INSERT INTO schema_version (id, version) VALUES (1, ?)"
            " ON CONFLICT(id) DO UPDATE SET version = excluded.version",
            (LATEST_VERSION,),
        )
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return LATEST_VERSION

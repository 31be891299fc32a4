"""The durable store: session logs, stored responses, idempotency records, tasks.

Layout under the store's root directory::

    <root>/store.sqlite3        the one SQLite database (WAL mode, foreign keys on)
    <root>/store.sqlite3-wal    its write-ahead log (SQLite's own)
    <root>/store.sqlite3-shm    its WAL index (SQLite's own)

One process owns a root at a time: opening it abandons the Idempotency-Key
claims and fails the tasks that an earlier process left unfinished.

A *session* is a conversation's ordered log of events ('head', 'input',
'output'), each with the exact token ids it rendered to or was generated as.
A session may fork another at an event index: it refers to the parent and
inherits its first ``parent_len`` events; reads walk the ancestry. A *stored
response* maps ``resp_…`` to its session and ``end`` (the event after its
last) plus the protocol's opaque bodies.

``commit_turn`` writes a turn's events and its response record in one
``synchronous=FULL`` transaction, so a response is on disk, whole, before
anyone is told of it, and no reader can see a record without its events.

Deleting a response hides it and purges its session logically: each fork of
the session is rerooted (it copies the events it inherited from the purged
session and refers to that session's own parent instead), so its tokens do not
change. Purged events stay in the file until ``vacuum``.

Every public method is one short transaction and is safe to call from any
thread (e.g. through ``asyncio.to_thread``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal

from jupyter_superfluid.store import conversations, log, responses
from jupyter_superfluid.store.conversations import ConversationsMixin
from jupyter_superfluid.store.db import Database
from jupyter_superfluid.store.idempotency import (
    DEFAULT_IDEMPOTENCY_TTL,
    IdempotencyMixin,
    IdempotentResult,
    finish_in,
    recover_idempotency,
)
from jupyter_superfluid.store.keys import new_id
from jupyter_superfluid.store.records import (
    Event,
    NewResponse,
    NewSession,
    ResponseRecord,
    SessionInfo,
)
from jupyter_superfluid.store.served_models import ServedModelsMixin
from jupyter_superfluid.store.session_tokens import REMEMBERED_TOKENS, SessionTokens
from jupyter_superfluid.store.tasks import (
    DEFAULT_TASK_EVENT_RETENTION,
    TasksMixin,
    recover_tasks,
)

STORE_FILE = "store.sqlite3"


class Store(IdempotencyMixin, TasksMixin, ServedModelsMixin, ConversationsMixin):
    """The durable store under one root directory."""

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        idempotency_ttl: float = DEFAULT_IDEMPOTENCY_TTL,
        task_event_retention: float = DEFAULT_TASK_EVENT_RETENTION,
        clock: Callable[[], float] = time.time,
        readonly: bool = False,
    ) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.path = self.root / STORE_FILE
        self.idempotency_ttl = idempotency_ttl
        self.task_event_retention = task_event_retention
        self._clock = clock
        self.boot_id = new_id("boot")  # tells this process's claims from earlier ones'
        self._db = Database(self.path, readonly=readonly)
        # Committed sessions' tokens, continued without a read; not in a reader beside the
        # owning process, which may purge what it would remember.
        self._tokens = SessionTokens(0 if readonly else REMEMBERED_TOKENS)
        self.recovered_claims = self.recovered_tasks = 0
        if readonly:
            return  # a reader (tests, backups, tools) beside the owning process
        with self._db.write() as conn:
            now = self._clock()
            self.recovered_claims = recover_idempotency(conn, self.boot_id, now)
            self.recovered_tasks = recover_tasks(conn, self.boot_id, now)
        self.prune_task_events()

    def close(self) -> None:
        """Close the store's connections (every thread's)."""
        self._db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- sessions --------------------------------------------------------------

    def get_session(self, session_id: str) -> SessionInfo | None:
        """A live session's header (model, fork point, length, meta), or None."""
        with self._db.read() as conn:
            row = log.live_session(conn, session_id)
        return None if row is None else log.session_info(row)

    def session_events(self, session_id: str, end: int | None = None) -> list[Event]:
        """Events [0, end) of a session through its forks (SessionNotFound if purged)."""
        with self._db.read() as conn:
            return log.read_events(conn, session_id, end)

    def session_tokens(self, session_id: str, end: int | None = None) -> list[int]:
        """Token ids of events [0, end) of a session through its forks, concatenated."""
        if end is not None and (known := self._tokens.get(session_id, end)) is not None:
            return known
        with self._db.read() as conn:
            tokens = log.read_tokens(conn, session_id, end)
        if end is not None:
            self._tokens.put(session_id, end, tokens)
        return tokens.tolist()

    def commit_turn(
        self,
        session: NewSession,
        events: Sequence[Event],
        response: NewResponse | None = None,
        *,
        idempotency: IdempotentResult | None = None,
    ) -> int:
        """Durably append a turn's events and insert its record at once; return the new end."""
        with self._db.write() as conn:
            now = self._clock()
            start = log.ensure_session(conn, session, now)
            end = log.append_events(conn, session.id, start, events)
            if response is not None:
                responses.insert(conn, response, session.id, end, now)
                if response.conversation is not None:
                    conversations.append_turn(
                        conn, response.conversation, response.id, response.output_items, now
                    )
            if idempotency is not None:
                finish_in(conn, idempotency, self.boot_id)
        # What [0, start) was: this session's own, or (new) its parent's up to the fork.
        bases = [(session.id, start)]
        if session.parent_id is not None and session.parent_len == start:
            bases.append((session.parent_id, start))
        self._tokens.committed(session.id, start, end, bases, (e.tokens for e in events))
        return end

    # -- responses -------------------------------------------------------------

    def get_response(self, response_id: str, principal: str | None = None) -> ResponseRecord | None:
        """A live record visible to ``principal`` (None: no isolation), else None."""
        with self._db.read() as conn:
            row = responses.fetch(conn, response_id)
        if row is None or not responses.is_visible(row, principal):
            return None
        return responses.to_record(row)

    def response_chain(
        self, response_id: str, principal: str | None = None
    ) -> list[ResponseRecord]:
        """Root→leaf records ending at a visible response, hidden deleted ones included."""
        with self._db.read() as conn:
            if not responses.is_visible(responses.fetch(conn, response_id), principal):
                return []
            return responses.chain(conn, response_id)

    def list_responses(
        self,
        principal: str | None = None,
        *,
        limit: int = 20,
        after: str | None = None,
        order: Literal["asc", "desc"] = "desc",
    ) -> list[ResponseRecord]:
        """Visible records, newest first by default, past the cursor id ``after``."""
        with self._db.read() as conn:
            return responses.page(conn, principal, limit, after, order)

    def children(
        self, response_id: str, principal: str | None = None, *, include_deleted: bool = False
    ) -> list[ResponseRecord]:
        """Records that continue ``response_id`` (its branches), oldest first."""
        with self._db.read() as conn:
            return responses.children(conn, response_id, principal, include_deleted)

    def delete_response(self, response_id: str, principal: str | None = None) -> bool:
        """Delete a visible response (purge, reroot forks, cascade); False if not visible."""
        with self._db.write() as conn:
            deleted = responses.delete(conn, response_id, principal)
        self._tokens.clear()  # purged sessions are read no more
        return deleted

    # -- maintenance -----------------------------------------------------------

    def vacuum(self, *, unreferenced_before: float | None = None, compact: bool = False) -> int:
        """Drop purged events, expired records and old task events; count rows removed.

        ``unreferenced_before`` also drops session logs older than that time that
        no response or fork refers to (the logs of ``store: false`` turns);
        ``compact`` rewrites the file to give the space back to the disk.
        """
        removed = self.prune_idempotency() + self.prune_task_events()
        with self._db.write(durable=False) as conn:
            if unreferenced_before is not None:
                removed += log.drop_unreferenced(conn, unreferenced_before)
            removed += log.drop_purged(conn)
        self._tokens.clear()
        self._db.checkpoint(compact=compact)
        return removed

"""Conversations: named, owned sequences of items over the stored responses.

A conversation (``conv_…``) is a branch head that moves. Its items are kept in order
(``conversation_items``): those added directly (pending until a response consumes
them) and those a response in the conversation took as input or gave as output. A
response created in a conversation is committed together with its items, in the
turn's own transaction, so a conversation never shows half a turn.

``head_response_id`` is the conversation's newest response. While the items are
exactly that response's chain plus pending items (``head_valid``), the next turn
continues the head warm through ``previous_response_id``; deleting an item of the
chain clears ``head_valid``, and the next turn sends the remaining items whole.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from jupyter_superfluid.store import responses
from jupyter_superfluid.store.db import Database
from jupyter_superfluid.store.records import ConversationAppend, ResponseRecord, StoreError
from jupyter_superfluid.store.session_tokens import SessionTokens


class ConversationNotFound(StoreError, KeyError):
    """A conversation id that is unknown, deleted, or another principal's."""


class ConversationItemNotFound(StoreError, KeyError):
    """An item id that the conversation does not hold."""


class NotInConversation(StoreError, KeyError):
    """A response id that no live response of the conversation has."""


@dataclass(frozen=True)
class ConversationRecord:
    """A live conversation as the store keeps it."""

    id: str
    principal: str | None
    metadata: dict[str, Any]
    head_response_id: str | None
    head_valid: bool
    created_at: float
    updated_at: float
    title: str  # metadata's title, else the preview of its first input


@dataclass(frozen=True)
class ConversationItem:
    """One item of a conversation, in order; ``response_id`` None while pending."""

    id: str
    item: dict[str, Any]
    response_id: str | None
    position: int


def _record(row: sqlite3.Row) -> ConversationRecord:
    metadata = json.loads(row["metadata"])
    return ConversationRecord(
        id=row["id"],
        principal=row["principal"],
        metadata=metadata,
        head_response_id=row["head_response_id"],
        head_valid=bool(row["head_valid"]),
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        title=str(metadata.get("title") or row["title"]),
    )


def _fetch(conn: sqlite3.Connection, conv_id: str, principal: str | None) -> sqlite3.Row:
    row = conn.execute(
        "SELECT * FROM conversations WHERE id = ? AND deleted = 0", (conv_id,)
    ).fetchone()
    if row is None or (principal is not None and row["principal"] != principal):
        raise ConversationNotFound(conv_id)
    return row


def _insert_items(
    conn: sqlite3.Connection,
    conv_id: str,
    items: Sequence[dict[str, Any]],
    response_id: str | None,
) -> None:
    start = conn.execute(
        "SELECT COALESCE(MAX(pos), -1) + 1 FROM conversation_items WHERE conversation_id = ?",
        (conv_id,),
    ).fetchone()[0]
    conn.executemany(
        "INSERT INTO conversation_items (conversation_id, pos, id, item, response_id)"
        " VALUES (?, ?, ?, ?, ?)",
        [
            (conv_id, start + i, str(item.get("id", "")), json.dumps(item), response_id)
            for i, item in enumerate(items)
        ],
    )


def append_turn(
    conn: sqlite3.Connection,
    append: ConversationAppend,
    response_id: str,
    output_items: Sequence[dict[str, Any]],
    now: float,
) -> None:
    """Add a committed turn to its conversation: its pending items consumed, its head moved."""
    conv_id = append.conversation_id
    conn.execute(
        "INSERT INTO conversation_responses (conversation_id, response_id) VALUES (?, ?)",
        (conv_id, response_id),
    )
    if append.rebase:  # a new branch: the items become that branch's
        _rebase(conn, conv_id, response_id)
    else:
        conn.execute(
            "UPDATE conversation_items SET response_id = ?"
            " WHERE conversation_id = ? AND response_id IS NULL AND deleted = 0",
            (response_id, conv_id),
        )
        _insert_items(conn, conv_id, [*append.input_items, *output_items], response_id)
    conn.execute(
        "UPDATE conversations SET head_response_id = ?, head_valid = 1, updated_at = ?,"
        " title = CASE WHEN title = '' THEN ? ELSE title END WHERE id = ?",
        (response_id, now, _first_text(append.input_items), conv_id),
    )


def _rebase(conn: sqlite3.Connection, conv_id: str, head_id: str) -> None:
    """Replace the conversation's items with those of the chain ending at ``head_id``."""
    conn.execute("UPDATE conversation_items SET deleted = 1 WHERE conversation_id = ?", (conv_id,))
    for record in responses.chain(conn, head_id):
        items = [*record.input_items, *record.output_items]
        _insert_items(conn, conv_id, items, record.id)


def _is_member(conn: sqlite3.Connection, conv_id: str, response_id: str) -> bool:
    row = conn.execute(
        "SELECT 1 FROM conversation_responses cr JOIN responses r ON r.id = cr.response_id"
        " WHERE cr.conversation_id = ? AND cr.response_id = ? AND r.deleted = 0",
        (conv_id, response_id),
    ).fetchone()
    return row is not None


def _first_text(items: Sequence[dict[str, Any]]) -> str:
    """A short title from the first message's text."""
    for item in items:
        content = item.get("content")
        if item.get("type", "message") == "message" and content:
            text = content if isinstance(content, str) else ""
            if isinstance(content, list):
                text = " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
            text = " ".join(text.split())
            if text:
                return text[:80]
    return ""


class ConversationsMixin:
    """Conversation methods of ``Store``."""

    _db: Database
    _clock: Callable[[], float]
    _tokens: SessionTokens

    def create_conversation(
        self,
        conv_id: str,
        principal: str | None,
        metadata: dict[str, Any],
        items: Sequence[dict[str, Any]],
    ) -> ConversationRecord:
        """A new conversation holding ``items`` (pending)."""
        now = self._clock()
        with self._db.write() as conn:
            conn.execute(
                "INSERT INTO conversations (id, principal, metadata, title, created_at,"
                " updated_at) VALUES (?, ?, ?, ?, ?, ?)",
                (conv_id, principal, json.dumps(metadata), _first_text(items), now, now),
            )
            _insert_items(conn, conv_id, items, None)
            return _record(_fetch(conn, conv_id, principal))

    def get_conversation(self, conv_id: str, principal: str | None) -> ConversationRecord:
        """A live conversation visible to ``principal`` (ConversationNotFound otherwise)."""
        with self._db.read() as conn:
            return _record(_fetch(conn, conv_id, principal))

    def update_conversation(
        self, conv_id: str, principal: str | None, metadata: dict[str, Any]
    ) -> ConversationRecord:
        """Replace a conversation's metadata."""
        with self._db.write() as conn:
            _fetch(conn, conv_id, principal)
            conn.execute(
                "UPDATE conversations SET metadata = ?, updated_at = ? WHERE id = ?",
                (json.dumps(metadata), self._clock(), conv_id),
            )
            return _record(_fetch(conn, conv_id, principal))

    def delete_conversation(self, conv_id: str, principal: str | None) -> None:
        """Delete a conversation and purge the responses it holds."""
        with self._db.write() as conn:
            _fetch(conn, conv_id, principal)
            conn.execute("UPDATE conversations SET deleted = 1 WHERE id = ?", (conv_id,))
            rows = conn.execute(
                "SELECT cr.response_id FROM conversation_responses cr"
                " JOIN responses r ON r.id = cr.response_id"
                " WHERE cr.conversation_id = ? ORDER BY r.seq DESC",
                (conv_id,),
            ).fetchall()
            for row in rows:  # every branch's responses, newest first
                responses.delete(conn, row["response_id"], principal)
            conn.execute("DELETE FROM conversation_items WHERE conversation_id = ?", (conv_id,))
        self._tokens.clear()  # purged sessions are read no more

    def list_conversations(
        self,
        principal: str | None,
        *,
        limit: int,
        after: str | None,
        order: Literal["asc", "desc"],
        query: str | None = None,
    ) -> list[ConversationRecord]:
        """Live conversations by last activity (newest first by default), past ``after``."""
        where, params = ["deleted = 0"], []
        if principal is not None:
            where.append("principal = ?")
            params.append(principal)
        if query:
            where.append("(title LIKE ? ESCAPE '\\' OR metadata LIKE ? ESCAPE '\\')")
            like = "%" + query.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
            params += [like, like]
        with self._db.read() as conn:
            if after is not None:
                cursor = _fetch(conn, after, principal)
                where.append(
                    "(updated_at, seq) < (?, ?)"
                    if order == "desc"
                    else "(updated_at, seq) > (?, ?)"
                )
                params += [cursor["updated_at"], cursor["seq"]]
            direction = "DESC" if order == "desc" else "ASC"
            sql = (
                f"SELECT * FROM conversations WHERE {' AND '.join(where)}"
                f" ORDER BY updated_at {direction}, seq {direction} LIMIT ?"
            )
            return [_record(r) for r in conn.execute(sql, (*params, max(0, limit)))]

    def switch_conversation_branch(
        self, conv_id: str, principal: str | None, response_id: str
    ) -> None:
        """Move the head to another of the conversation's responses, and its items with it."""
        with self._db.write() as conn:
            _fetch(conn, conv_id, principal)
            if not _is_member(conn, conv_id, response_id):
                raise NotInConversation(response_id)
            _rebase(conn, conv_id, response_id)
            conn.execute(
                "UPDATE conversations SET head_response_id = ?, head_valid = 1, updated_at = ?"
                " WHERE id = ?",
                (response_id, self._clock(), conv_id),
            )

    def conversation_responses(self, conv_id: str, principal: str | None) -> list[ResponseRecord]:
        """Every live response created in the conversation, on any branch, oldest first."""
        with self._db.read() as conn:
            _fetch(conn, conv_id, principal)
            rows = conn.execute(
                "SELECT r.* FROM conversation_responses cr JOIN responses r"
                " ON r.id = cr.response_id WHERE cr.conversation_id = ? AND r.deleted = 0"
                " ORDER BY r.seq",
                (conv_id,),
            ).fetchall()
        return [responses.to_record(row) for row in rows]

    def is_in_conversation(self, conv_id: str, principal: str | None, response_id: str) -> bool:
        """Whether ``response_id`` is a live response of the conversation."""
        with self._db.read() as conn:
            _fetch(conn, conv_id, principal)
            return _is_member(conn, conv_id, response_id)

    def conversation_items(self, conv_id: str, principal: str | None) -> list[ConversationItem]:
        """Every live item of a conversation, oldest first."""
        return self.conversation_state(conv_id, principal)[1]

    def conversation_state(
        self, conv_id: str, principal: str | None, *, pending_only: bool = False
    ) -> tuple[ConversationRecord, list[ConversationItem]]:
        """A conversation and its live items (oldest first), read at one instant.

        ``pending_only``: while its head is valid, only the items not yet answered (what
        its next turn adds), so a turn reads and decodes nothing of the history.
        """
        with self._db.read() as conn:
            rec = _record(_fetch(conn, conv_id, principal))
            pending = " AND response_id IS NULL" if pending_only and rec.head_valid else ""
            rows = conn.execute(
                "SELECT * FROM conversation_items WHERE conversation_id = ? AND deleted = 0"
                + pending
                + " ORDER BY pos",
                (conv_id,),
            ).fetchall()
        items = [
            ConversationItem(r["id"], json.loads(r["item"]), r["response_id"], r["pos"])
            for r in rows
        ]
        return rec, items

    def add_conversation_items(
        self, conv_id: str, principal: str | None, items: Sequence[dict[str, Any]]
    ) -> None:
        """Append ``items`` to a conversation, pending until its next response."""
        with self._db.write() as conn:
            row = _fetch(conn, conv_id, principal)
            _insert_items(conn, conv_id, items, None)
            title = row["title"] or _first_text(items)
            conn.execute(
                "UPDATE conversations SET updated_at = ?, title = ? WHERE id = ?",
                (self._clock(), title, conv_id),
            )

    def delete_conversation_item(self, conv_id: str, principal: str | None, item_id: str) -> None:
        """Remove an item; removing one of the head's chain makes the next turn send all."""
        with self._db.write() as conn:
            _fetch(conn, conv_id, principal)
            row = conn.execute(
                "SELECT pos, response_id FROM conversation_items"
                " WHERE conversation_id = ? AND id = ? AND deleted = 0",
                (conv_id, item_id),
            ).fetchone()
            if row is None:
                raise ConversationItemNotFound(item_id)
            conn.execute(
                "UPDATE conversation_items SET deleted = 1 WHERE conversation_id = ? AND pos = ?",
                (conv_id, row["pos"]),
            )
            valid = "head_valid" if row["response_id"] is None else "0"
            conn.execute(
                f"UPDATE conversations SET head_valid = {valid}, updated_at = ? WHERE id = ?",
                (self._clock(), conv_id),
            )

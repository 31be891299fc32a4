"""Plain records the store reads and writes, and the store's own errors.

Everything here is a frozen dataclass of plain values so it can cross threads
(and, later, processes) freely. JSON fields hold decoded Python values; the
store encodes them on write and decodes them on read and never looks inside
the protocol bodies (``body``, ``input_items``, ``output_items``, ``result``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

EventKind = Literal["head", "input", "output"]
Protocol = Literal["openai", "lmsp"]
ClaimState = Literal["claimed", "in_progress", "done", "conflict"]
TaskStatus = Literal["queued", "running", "completed", "incomplete", "failed", "cancelled"]

EVENT_KINDS: frozenset[str] = frozenset({"head", "input", "output"})
LIVE_TASK_STATUSES: frozenset[str] = frozenset({"queued", "running"})
FINAL_TASK_STATUSES: frozenset[str] = frozenset({"completed", "incomplete", "failed", "cancelled"})


class StoreError(Exception):
    """Base class of every error the store raises on purpose."""


class SessionNotFound(StoreError, KeyError):
    """A session id that is unknown or purged."""


class ResponseNotFound(StoreError, KeyError):
    """A response id that is unknown, deleted, or not visible to the principal."""


class TaskNotFound(StoreError, KeyError):
    """A task id that is unknown."""


class SessionConflict(StoreError):
    """An append that does not fit the session as it is on disk now."""


class EventHistoryExpired(StoreError):
    """Task events asked for were pruned by the retention window (LMSP 410)."""

    def __init__(self, task_id: str, oldest_retained_seq: int) -> None:
        super().__init__(f"events of {task_id} before {oldest_retained_seq} have expired")
        self.task_id = task_id
        self.oldest_retained_seq = oldest_retained_seq


@dataclass(frozen=True)
class Event:
    """One entry of a session log: its kind, its source item and its exact token ids."""

    kind: EventKind
    tokens: tuple[int, ...]
    item: Any = None  # JSON value; None allowed (e.g. for the head)

    def __post_init__(self) -> None:
        if self.kind not in EVENT_KINDS:
            raise ValueError(f"event kind must be head, input or output, not {self.kind!r}")
        if not isinstance(self.tokens, tuple):
            object.__setattr__(self, "tokens", tuple(self.tokens))


@dataclass(frozen=True)
class NewSession:
    """The session a turn is committed to; created on first commit, appended to after."""

    id: str
    model: str
    parent_id: str | None = None  # fork of this session ...
    parent_len: int = 0  # ... inheriting its first parent_len events (through its ancestry)
    meta: Mapping[str, Any] = field(default_factory=dict)
    # When set and the session exists, the commit fails unless the session still has
    # exactly this many events: the caller rendered its new events after that state.
    expect_len: int | None = None


@dataclass(frozen=True)
class SessionInfo:
    """A session's header: where it forks from and how many events it holds in all."""

    id: str
    model: str
    parent_id: str | None
    parent_len: int
    length: int  # events through ancestry, i.e. parent_len + its own
    meta: Mapping[str, Any]
    created_at: float


@dataclass(frozen=True)
class ConversationAppend:
    """What a turn adds to its conversation, committed with its response."""

    conversation_id: str
    input_items: Sequence[Any]  # the request's own input (not the history it was sent)
    rebase: bool = False  # a new branch: the conversation's items become its chain's


@dataclass(frozen=True)
class NewResponse:
    """A stored response as the protocol layer hands it to ``commit_turn``."""

    id: str
    model: str
    status: str
    body: Any  # the protocol's response object, opaque here
    input_items: Sequence[Any] = ()
    output_items: Sequence[Any] = ()
    previous_response_id: str | None = None
    principal: str | None = None  # hash_key() of the creating key, never the key
    protocol: Protocol = "openai"
    created_at: float | None = None  # None: the store's clock
    cached_tokens: int = 0
    preview: str = ""
    conversation: ConversationAppend | None = None  # the conversation it moves ahead


@dataclass(frozen=True)
class ResponseRecord:
    """A stored response as read back: the request's record plus where it lives."""

    id: str
    model: str
    session_id: str
    end: int  # events of the session (through ancestry) that make up this response
    status: str
    body: Any
    input_items: list[Any]
    output_items: list[Any]
    previous_response_id: str | None
    principal: str | None
    protocol: str
    created_at: float
    cached_tokens: int
    preview: str
    deleted: bool


@dataclass(frozen=True)
class IdempotencyRecord:
    """The durable state of one Idempotency-Key of one principal."""

    principal: str | None
    key: str
    body_hash: str
    state: Literal["in_progress", "done"]
    result: Any  # JSON set by finish_idempotent; None while in progress
    created_at: float
    expires_at: float


@dataclass(frozen=True)
class TaskRecord:
    """An LMSP task: a responses request that runs without an HTTP connection."""

    id: str
    principal: str | None
    status: str
    response_id: str | None
    request: Any
    error: Any
    created_at: float
    updated_at: float
    last_seq: int  # seq of its newest event; 0 before the first
    result: Any = None  # the protocol's final result (opaque JSON), set when it finished

    @property
    def final(self) -> bool:
        """Whether the task reached a final status (no more events will come)."""
        return self.status in FINAL_TASK_STATUSES


@dataclass(frozen=True)
class TaskEvent:
    """One event of a task, numbered from 1 (the SSE ``id``)."""

    task_id: str
    seq: int
    event: str
    data: Any
    created_at: float

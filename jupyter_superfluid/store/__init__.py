"""The durable store: session logs with forks, stored responses, LMSP idempotency and tasks.

Stdlib only (SQLite); knows nothing of HTTP, Jupyter or the engine. See
``store`` for the on-disk layout and the semantics of commits and deletes.
"""

from __future__ import annotations

from jupyter_superfluid.store.conversations import (
    ConversationItem,
    ConversationItemNotFound,
    ConversationNotFound,
    ConversationRecord,
)
from jupyter_superfluid.store.idempotency import DEFAULT_IDEMPOTENCY_TTL, IdempotentResult
from jupyter_superfluid.store.keys import hash_key, keys_match, new_id
from jupyter_superfluid.store.records import (
    ClaimState,
    ConversationAppend,
    Event,
    EventHistoryExpired,
    EventKind,
    IdempotencyRecord,
    NewResponse,
    NewSession,
    ResponseNotFound,
    ResponseRecord,
    SessionConflict,
    SessionInfo,
    SessionNotFound,
    StoreError,
    TaskEvent,
    TaskNotFound,
    TaskRecord,
    TaskStatus,
)
from jupyter_superfluid.store.schema import LATEST_VERSION
from jupyter_superfluid.store.served_models import ServedModelRecord
from jupyter_superfluid.store.store import STORE_FILE, Store
from jupyter_superfluid.store.tasks import DEFAULT_TASK_EVENT_RETENTION, RESTART_PROBLEM

__all__ = [
    "DEFAULT_IDEMPOTENCY_TTL",
    "DEFAULT_TASK_EVENT_RETENTION",
    "LATEST_VERSION",
    "RESTART_PROBLEM",
    "STORE_FILE",
    "ClaimState",
    "ConversationAppend",
    "ConversationItem",
    "ConversationItemNotFound",
    "ConversationNotFound",
    "ConversationRecord",
    "Event",
    "EventHistoryExpired",
    "EventKind",
    "IdempotencyRecord",
    "IdempotentResult",
    "NewResponse",
    "NewSession",
    "ResponseNotFound",
    "ResponseRecord",
    "ServedModelRecord",
    "SessionConflict",
    "SessionInfo",
    "SessionNotFound",
    "Store",
    "StoreError",
    "TaskEvent",
    "TaskNotFound",
    "TaskRecord",
    "TaskStatus",
    "hash_key",
    "keys_match",
    "new_id",
]

"""LMSP ``Idempotency-Key``: per principal, for the POSTs that create.

The first request with a key claims it in the store and runs; its result is
written in the same transaction as what it created (the turn, or the task),
so a key is never "done" without its result nor the result without the key.
Then the same key with the same body gets that result again (with
``Idempotent-Replayed: true``), the same key with another body a 422, and the
same key while the first request still runs a 409. Records are durable for the
store's ``idempotency_ttl`` (24 h by default); a claim whose process died is
released when the store next opens, so a retry can run.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

from jupyter_superfluid.errors import InvalidRequest
from jupyter_superfluid.lmsp.problems import IdempotencyInProgress, IdempotencyKeyReused
from jupyter_superfluid.store import IdempotentResult, Store
from jupyter_superfluid.web.auth import Principal

KEY_HEADER = "Idempotency-Key"
REPLAYED_HEADER = "Idempotent-Replayed"
_KEY = re.compile(r"^[\x21-\x7e]{1,255}$")  # visible ASCII, as HTTP header values allow


@dataclass
class Claim:
    """A key this request holds: it runs, then records its result (or lets go)."""

    store: Store
    principal: str | None
    key: str
    done: bool = False

    def result(self, value: dict[str, Any]) -> IdempotentResult:
        """The record that finishes this claim, to commit with what it describes."""
        return IdempotentResult(self.principal, self.key, value)

    async def release(self) -> None:
        """Let go of an unfinished claim (the request failed), so a retry can run."""
        if not self.done:
            self.done = True
            await asyncio.to_thread(self.store.abandon_idempotent, self.principal, self.key)


@dataclass(frozen=True)
class Replay:
    """The recorded result of an earlier request with the same key and body."""

    result: dict[str, Any]


def body_hash(route: str, body: dict[str, Any]) -> str:
    """A digest of what was asked: the route and the body's canonical JSON."""
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(f"{route}\n{canonical}".encode()).hexdigest()


class Idempotency:
    """Claims and replays of Idempotency-Keys in the durable store."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def begin(
        self, principal: Principal, key: str | None, route: str, body: dict[str, Any]
    ) -> Claim | Replay | None:
        """Claim ``key`` (None without one), or the earlier result, or a 409/422."""
        if key is None:
            return None
        if not _KEY.match(key):
            raise InvalidRequest(
                f"{KEY_HEADER} must be 1 to 255 visible ASCII characters", param=KEY_HEADER
            )
        digest = body_hash(route, body)
        state, record = await asyncio.to_thread(
            self.store.begin_idempotent, principal.owner, key, digest
        )
        if state == "claimed":
            return Claim(self.store, principal.owner, key)
        if state == "done":
            return Replay(record.result)
        if state == "in_progress":
            raise IdempotencyInProgress(
                f"a request with this {KEY_HEADER} is still running; retry when it has finished",
                param=KEY_HEADER,
            )
        raise IdempotencyKeyReused(
            f"this {KEY_HEADER} was used with another request body", param=KEY_HEADER
        )

"""The engine's KV operation counters around a measured turn, read from the models endpoint.

A warm turn's time depends on what the engine did for it: whether it parked another
conversation, restored this one, saved a state or dropped a slot. The counters
(``GET /v1/models/{id}``, its ``superfluid`` key) are read just before and just after
the turn, so what happened between turns (write-behind, other servers' turns) is left out.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TypeVar

import httpx

from bench.model import MODEL_ID
from bench.servers import Server

KV_OPS = ("parked", "restored", "states_saved", "slots_dropped")
T = TypeVar("T")


async def kv_ops(http: httpx.AsyncClient, server: Server) -> dict[str, int]:
    """The engine's KV operation counters so far."""
    answer = await http.get(f"{server.url}/v1/models/{MODEL_ID}", headers=server.headers)
    answer.raise_for_status()
    counters = answer.json().get("superfluid") or {}
    return {name: int(counters.get(name) or 0) for name in KV_OPS}


async def counted(
    http: httpx.AsyncClient, server: Server, totals: dict[str, int], turn: Awaitable[T]
) -> T:
    """Await ``turn`` on ``server``, adding the KV operations it caused to ``totals``."""
    before = await kv_ops(http, server)
    result = await turn
    after = await kv_ops(http, server)
    for name in KV_OPS:
        totals[name] = totals.get(name, 0) + after[name] - before[name]
    return result


def described(totals: dict[str, int]) -> str:
    """``2 parked, 0 restored, ...``."""
    return ", ".join(f"{totals.get(name, 0)} {name.replace('_', ' ')}" for name in KV_OPS)

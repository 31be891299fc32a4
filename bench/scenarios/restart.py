"""Scenario 8, warm after a restart: TTFT of a continuation on a restarted server, by history.

For each history length a conversation is built on superfluid (stored, so its
KV state is kept) and the server waits until that state is on disk. Each
repetition then stops the server (SIGTERM), starts a new one on the same
store and measures the next turn via ``previous_response_id``: its prefix is
restored from ``<sessions>/kv/`` instead of evaluated. The baseline is the same
turn with the whole conversation resent to a freshly started superfluid (cold).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import httpx

from bench.client import StreamResult
from bench.context import Context
from bench.conversation import Conversation
from bench.model import MODEL_ID
from bench.scenarios.common import (
    Section,
    cold_turn,
    median_of,
    ratio_of,
    spread,
    times,
    ttft_summary,
)
from bench.servers import Server
from bench.turns import sf_build_turn, sf_continue

REPLY_ALLOWANCE = 40
TARGET = 0.2  # restarted warm TTFT / cold TTFT at the longest history


async def _stats(http: httpx.AsyncClient, server: Server) -> dict[str, Any]:
    r = await http.get(f"{server.url}/v1/models/{MODEL_ID}")
    return dict(r.json()["superfluid"])


async def _until_on_disk(http: httpx.AsyncClient, server: Server, timeout: float = 120) -> None:
    """Until the idle server has written what it keeps (it writes when idle)."""
    deadline = time.monotonic() + timeout
    while True:
        stats = await _stats(http, server)
        if stats.get("unsaved") == 0 and stats.get("disk_pending") == 0:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"the KV state never reached the disk: {stats}")
        await asyncio.sleep(0.1)


async def _build(ctx: Context, history: int, sessions: Path) -> Conversation:
    """A stored conversation of about ``history`` tokens, its state on disk, the server stopped."""
    server = await ctx.superfluid(sessions=sessions)
    conv = Conversation(f"r{history}")
    try:
        async with ctx.http() as http:
            size = max(16, history - REPLY_ALLOWANCE)
            await sf_build_turn(http, server, conv, ctx.tokenizer.text(size, seed=7000 + history))
            await _until_on_disk(http, server)
    finally:
        server.stop()
    return conv


async def _restarted_turn(
    ctx: Context, conv: Conversation, sessions: Path, user: str, seed: int
) -> tuple[StreamResult, int]:
    """The next turn on a freshly restarted server: (result, restores from disk it made)."""
    server = await ctx.superfluid(sessions=sessions)
    try:
        async with ctx.http() as http:
            before = int((await _stats(http, server)).get("restored_from_disk", 0))
            result = await sf_continue(
                http,
                server,
                conv.response_id or "",
                user,
                max_tokens=ctx.cfg.ttft_output_tokens,
                seed=seed,
            )
            restored = int((await _stats(http, server)).get("restored_from_disk", 0)) - before
    finally:
        server.stop()
    return result, restored


async def _measure(ctx: Context, history: int) -> dict[str, Any]:
    """Restarted-warm and cold TTFTs at one history length."""
    sessions = ctx.workdir / f"restart-{history}"
    conv = await _build(ctx, history, sessions)
    warm, cold, restored = [], [], []
    users = [
        ctx.tokenizer.text(ctx.cfg.turn_tokens, seed=8000 + rep) for rep in range(ctx.cfg.reps)
    ]
    for rep, user in enumerate(users):
        result, from_disk = await _restarted_turn(ctx, conv, sessions, user, rep)
        warm.append(result)
        restored.append(from_disk)
        if rep < ctx.cfg.cold_reps:
            cold.append(await cold_turn(ctx, conv, user, ctx.cfg.ttft_output_tokens, rep))
    s_warm, s_cold = ttft_summary(warm), ttft_summary(cold)
    ctx.log(f"restart: {conv.tokens} tokens measured")
    return {
        "history_tokens": conv.tokens,
        "restarted": s_warm,
        "cold": s_cold,
        "restarted_over_cold": ratio_of(s_warm, s_cold),
        "cached_tokens": median_of([r.cached_tokens for r in warm]),
        "restored_from_disk": sum(restored),
        "repetitions": len(warm),
    }


async def run(ctx: Context) -> Section:
    """One row per history length: continuation after a restart against a cold resend."""
    section = Section(
        id="restart",
        title="8. Warm after a restart: TTFT of the next turn on a restarted server",
        baseline="the same turn with the whole conversation sent to a freshly started superfluid",
        columns=[
            "history (tokens)",
            "restarted, from disk",
            "cold resend (baseline)",
            "restarted / cold",
            "cached tokens",
            "restored from disk",
        ],
    )
    for history in ctx.cfg.restart_histories:
        data = await _measure(ctx, history)
        section.data[str(history)] = data
        section.rows.append(
            [
                str(data["history_tokens"]),
                spread(data["restarted"]),
                spread(data["cold"]),
                times(data["restarted_over_cold"]),
                str(data["cached_tokens"]),
                f"{data['restored_from_disk']} of {data['repetitions']}",
            ]
        )
    last = section.data[str(ctx.cfg.restart_histories[-1])]
    top = last["restarted_over_cold"]
    section.target(
        f"restarted TTFT <= {TARGET} x cold at {last['history_tokens']} tokens",
        times(top),
        None if top is None else top <= TARGET,
    )
    section.notes.append(
        "Each repetition stops the server (SIGTERM) and starts a new one on the same store; "
        "its first request after the warm-up is the measured turn. Restored turns read, check "
        "(digest, identity, token ids) and load the conversation's KV file."
    )
    return section

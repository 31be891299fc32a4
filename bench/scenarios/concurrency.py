"""Scenario 5, throughput under concurrency: aggregate tokens/s of 1, 2, 4, 8 streams at once.

Each stream is a chat completion (the same protocol on both servers) with a
short prompt of its own and a fixed number of output tokens (end-of-turn
banned). Aggregate rate: tokens received by streams that finished, over the
wall time from the first request to the last stream's end. Errors: streams
that failed or ended short.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from ..client import StreamResult
from ..context import Context
from ..conversation import Conversation
from ..servers import Server
from ..stats import summary
from ..turns import chat_whole
from .common import Section, times

PROMPT_TOKENS = 24


async def _burst(ctx: Context, server: Server, n: int, rep: int) -> tuple[float, int, int, list]:
    """``n`` concurrent streams: (wall seconds, tokens, errors, results)."""
    users = [ctx.tokenizer.text(PROMPT_TOKENS, seed=50_000 + 100 * rep + i) for i in range(n)]
    k = ctx.cfg.concurrency_tokens
    async with ctx.http() as http:
        started = time.monotonic()
        results: list[StreamResult] = await asyncio.gather(
            *(
                chat_whole(http, server, Conversation(f"s{i}"), u, max_tokens=k, seed=i)
                for i, u in enumerate(users)
            )
        )
        wall = time.monotonic() - started
    good = [r for r in results if r.ok and r.status == "length"]
    return wall, sum(r.output_tokens or 0 for r in good), len(results) - len(good), results


async def _measure(ctx: Context, server: Server) -> dict[int, dict[str, Any]]:
    """Per stream count: aggregate tok/s summary, errors, median TTFT."""
    out = {}
    for n in ctx.cfg.concurrency:
        rates, errors, ttfts = [], 0, []
        for rep in range(ctx.cfg.reps):
            wall, tokens, errs, results = await _burst(ctx, server, n, rep)
            rates.append(tokens / wall)
            errors += errs
            ttfts += [r.ttft for r in results if r.ttft is not None]
        out[n] = {"rate": summary(rates), "errors": errors, "ttft": summary(ttfts)}
    return out


def _cell(entry: dict[str, Any] | None) -> str:
    """``median (low-high) tok/s``."""
    if not entry or entry["rate"]["median"] is None:
        return "-"
    s = entry["rate"]
    return f"{s['median']:.0f} ({s['min']:.0f}-{s['max']:.0f}) tok/s"


def _errors(entry: dict[str, Any] | None) -> str:
    """The error count, or a dash."""
    return "-" if entry is None else str(entry["errors"])


def _ms(entry: dict[str, Any] | None) -> str:
    """The median TTFT in ms."""
    if not entry or entry["ttft"]["median"] is None:
        return "-"
    return f"{entry['ttft']['median'] * 1000:.0f} ms"


async def run(ctx: Context) -> Section:
    """Measure both servers; one table row per stream count."""
    server = await ctx.superfluid()
    try:
        sf = await _measure(ctx, server)
    finally:
        server.stop()
    llama = await ctx.llama_cpp_server()
    lc = await _measure(ctx, llama) if llama is not None else {}
    ctx.log("concurrency: done")
    section = Section(
        id="concurrency",
        title=f"5. Throughput: concurrent {ctx.cfg.concurrency_tokens}-token streams",
        baseline="llama_cpp.server, the same streams (it serves one request at a time)",
        columns=[
            "streams",
            "superfluid",
            "errors",
            "median TTFT",
            "llama_cpp.server (baseline)",
            "errors",
            "median TTFT",
            "superfluid / llama_cpp.server",
        ],
    )
    for n in ctx.cfg.concurrency:
        a, b = sf[n], lc.get(n)
        r = a["rate"]["median"] / b["rate"]["median"] if b and b["rate"]["median"] else None
        section.rows.append(
            [str(n), _cell(a), str(a["errors"]), _ms(a), _cell(b), _errors(b), _ms(b), times(r)]
        )
        section.data[str(n)] = {"superfluid": a, "llama_cpp": b, "ratio": r}
    section.notes.append(
        "llama_cpp.server runs with --interrupt_requests False; with its default (True) a new "
        "request cuts off the stream in progress."
    )
    return section

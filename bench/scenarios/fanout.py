"""Scenario 3, branch fan-out: 8 branches from one stored 2k-token response.

Each branch continues the same stored response with a different new message
(``previous_response_id``). Per branch: TTFT, the prompt tokens the engine
evaluated (from its counters in ``/v1/models``), and the growth of the
server's resident memory (VmRSS) across the branch. Baselines: the same branch
with the whole conversation sent to a freshly started superfluid, and ``llama_cpp.server`` given
each branch resent whole one after another (its single sequence holds the
shared history after the first).
"""

from __future__ import annotations

from typing import Any

import httpx

from bench.client import StreamResult
from bench.context import Context
from bench.conversation import Conversation
from bench.model import MODEL_ID
from bench.scenarios.common import Section, cold_turn, ratio_of, spread, times, ttft_summary
from bench.servers import Server
from bench.turns import chat_whole, sf_build_turn, sf_continue

REPLY_ALLOWANCE = 50
KIB = 1024


async def _evaluated(http: httpx.AsyncClient, server: Server) -> int:
    """Prompt tokens the engine has evaluated since load."""
    r = await http.get(f"{server.url}/v1/models/{MODEL_ID}", headers=server.headers)
    return int(r.json()["superfluid"].get("prompt_tokens_evaluated", 0))


def _users(ctx: Context) -> list[str]:
    """Each branch's new user message."""
    n = ctx.cfg.fanout_branches
    return [ctx.tokenizer.text(ctx.cfg.turn_tokens, seed=30_000 + b) for b in range(n)]


async def _branch(
    http: httpx.AsyncClient, server: Server, root: Conversation, user: str, b: int, n: int
) -> dict[str, Any]:
    """One superfluid branch from ``root``: result, RSS growth, prompt tokens evaluated."""
    rss, evaluated = server.rss(), await _evaluated(http, server)
    r = await sf_continue(http, server, root.response_id or "", user, max_tokens=n, seed=b)
    growth = server.rss() - rss
    return {
        "result": r,
        "rss_growth": growth,
        "evaluated": await _evaluated(http, server) - evaluated,
    }


async def _llama_branch(
    http: httpx.AsyncClient, server: Server, root: Conversation, user: str, b: int, n: int
) -> dict[str, Any]:
    """The same branch resent whole to llama_cpp.server, with its RSS growth."""
    rss = server.rss()
    r = await chat_whole(http, server, root, user, max_tokens=n, seed=b)
    return {"result": r, "rss_growth": server.rss() - rss}


async def _measure(ctx: Context) -> tuple[Conversation, list[dict[str, Any]], list, list]:
    """The root; each branch on superfluid, then on llama_cpp.server; cold-server baselines.

    Each superfluid branch is followed by the same branch on llama_cpp.server,
    so a burst of load from elsewhere hits both alike.
    """
    cfg, n = ctx.cfg, ctx.cfg.branch_output_tokens
    llama = await ctx.llama_cpp_server()
    server = await ctx.superfluid()
    branches: list[dict[str, Any]] = []
    theirs: list[dict[str, Any]] = []
    try:
        async with ctx.http() as http:
            root = Conversation("root")
            size = cfg.fanout_history - REPLY_ALLOWANCE
            await sf_build_turn(http, server, root, ctx.tokenizer.text(size, seed=3000))
            for b, user in enumerate(_users(ctx)):
                branches.append(await _branch(http, server, root, user, b, n))
                if llama is not None:
                    theirs.append(await _llama_branch(http, llama, root, user, b, n))
    finally:
        server.stop()
    users = _users(ctx)[: cfg.cold_reps]
    cold = [await cold_turn(ctx, root, u, n, b) for b, u in enumerate(users)]
    return root, branches, theirs, cold


def _kib(value: int | None) -> str:
    """Bytes as KiB."""
    return "-" if value is None else f"{value / KIB:.0f} KiB"


async def run(ctx: Context) -> Section:
    """Measure 8 branches from one response; one table row per branch plus the medians."""
    root, branches, llama, cold = await _measure(ctx)
    ctx.log("fanout: done")
    section = Section(
        id="fanout",
        title=f"3. Branch fan-out: {len(branches)} branches from one stored response",
        baseline="the branch with the whole conversation sent to a freshly started superfluid",
        columns=[
            "branch",
            "superfluid TTFT",
            "cached tokens",
            "tokens evaluated",
            "RSS growth",
            "llama_cpp.server TTFT",
            "llama_cpp.server RSS growth",
        ],
    )
    section.rows = _branch_rows(branches, llama)
    s_branch = ttft_summary(b["result"] for b in branches)
    s_cold = ttft_summary(cold)
    s_llama = ttft_summary(x["result"] for x in llama[1:])  # after the first (cold) one
    rss = sorted(b["rss_growth"] for b in branches)
    section.data = {
        "history_tokens": root.tokens,
        "branch": s_branch,
        "cold": s_cold,
        "llama_cpp_after_first": s_llama,
        "branch_over_cold": ratio_of(s_branch, s_cold),
        "branch_over_llama_cpp": ratio_of(s_branch, s_llama),
        "rss_growth_bytes": [b["rss_growth"] for b in branches],
        "rss_growth_median_bytes": rss[len(rss) // 2],
        "tokens_evaluated": [b["evaluated"] for b in branches],
    }
    section.rows.append(
        ["median", spread(s_branch), "", "", _kib(rss[len(rss) // 2]), spread(s_llama), ""]
    )
    section.notes += [
        f"History {root.tokens} tokens. Cold server (baseline): {spread(s_cold)}; "
        f"branch / cold: {times(section.data['branch_over_cold'])}; branch / "
        f"llama_cpp.server after its first branch: {times(section.data['branch_over_llama_cpp'])}.",
        "llama_cpp.server's first branch is a full prompt; later ones reuse the shared "
        "history from its single sequence, because they arrive one after another.",
    ]
    return section


def _branch_rows(branches: list[dict[str, Any]], llama: list[dict[str, Any]]) -> list[list[str]]:
    """One table row per branch."""
    rows = []
    for b, branch in enumerate(branches):
        r: StreamResult = branch["result"]
        lc = llama[b] if b < len(llama) else None
        rows.append(
            [
                str(b + 1),
                _ms(r.ttft),
                str(r.cached_tokens),
                str(branch["evaluated"]),
                _kib(branch["rss_growth"]),
                _ms(lc["result"].ttft if lc else None),
                _kib(lc["rss_growth"] if lc else None),
            ]
        )
    return rows


def _ms(seconds: float | None) -> str:
    """Seconds as a millisecond cell."""
    return "-" if seconds is None else f"{seconds * 1000:.1f} ms"

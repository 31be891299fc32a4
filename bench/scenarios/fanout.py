"""Scenario 3, branch fan-out: 8 branches from one stored 2k-token response.

Each branch continues the same stored response with a different new message
(``previous_response_id``). Per branch: TTFT, the prompt tokens the engine
evaluated (from its counters in ``/v1/models``), and the growth of the
server's resident memory (VmRSS) across the branch. Baselines: the same branch
with the whole conversation resent uncached, and ``llama_cpp.server`` given
each branch resent whole one after another (its single sequence holds the
shared history after the first).
"""

from __future__ import annotations

from typing import Any

import httpx

from ..client import StreamResult
from ..context import Context
from ..conversation import Conversation, nonce
from ..model import MODEL_ID
from ..servers import Server
from ..turns import chat_whole, sf_build_turn, sf_continue, sf_whole
from .common import Section, ratio_of, spread, times, ttft_summary

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


async def _superfluid(ctx: Context) -> tuple[Conversation, list[dict[str, Any]], list]:
    """The root, each branch's measurements, and the uncached resends."""
    cfg = ctx.cfg
    server = await ctx.superfluid()
    branches: list[dict[str, Any]] = []
    try:
        async with ctx.http() as http:
            root = Conversation("root")
            size = cfg.fanout_history - REPLY_ALLOWANCE
            await sf_build_turn(http, server, root, ctx.tokenizer.text(size, seed=3000))
            for b, user in enumerate(_users(ctx)):
                rss, evaluated = server.rss(), await _evaluated(http, server)
                r = await sf_continue(
                    http, server, root.response_id or "", user,
                    max_tokens=cfg.branch_output_tokens, seed=b,
                )  # fmt: skip
                branches.append(
                    {
                        "result": r,
                        "rss_growth": server.rss() - rss,
                        "evaluated": await _evaluated(http, server) - evaluated,
                    }
                )
            cold = [
                await sf_whole(
                    http, server, root, user, max_tokens=cfg.branch_output_tokens, seed=b,
                    nonce=nonce("cold"),
                )
                for b, user in enumerate(_users(ctx)[: cfg.reps])
            ]  # fmt: skip
    finally:
        server.stop()
    return root, branches, cold


async def _llama_cpp(ctx: Context, root: Conversation) -> list[dict[str, Any]]:
    """Each branch resent whole to llama_cpp.server, with its RSS growth."""
    server = await ctx.llama_cpp_server()
    if server is None:
        return []
    out = []
    async with ctx.http() as http:
        for b, user in enumerate(_users(ctx)):
            rss = server.rss()
            r = await chat_whole(
                http, server, root, user, max_tokens=ctx.cfg.branch_output_tokens, seed=b
            )
            out.append({"result": r, "rss_growth": server.rss() - rss})
    return out


def _kib(value: int | None) -> str:
    """Bytes as KiB."""
    return "-" if value is None else f"{value / KIB:.0f} KiB"


async def run(ctx: Context) -> Section:
    """Measure 8 branches from one response; one table row per branch plus the medians."""
    root, branches, cold = await _superfluid(ctx)
    llama = await _llama_cpp(ctx, root)
    ctx.log("fanout: done")
    section = Section(
        id="fanout",
        title=f"3. Branch fan-out: {len(branches)} branches from one stored response",
        baseline="the branch with the whole conversation resent to superfluid, uncached",
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
    for b, branch in enumerate(branches):
        r: StreamResult = branch["result"]
        lc = llama[b] if b < len(llama) else None
        section.rows.append(
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
        f"History {root.tokens} tokens. Uncached resend (baseline): {spread(s_cold)}; "
        f"branch / uncached: {times(section.data['branch_over_cold'])}; branch / "
        f"llama_cpp.server after its first branch: {times(section.data['branch_over_llama_cpp'])}.",
        "llama_cpp.server's first branch is a full prompt; later ones reuse the shared "
        "history from its single sequence, because they arrive one after another.",
    ]
    return section


def _ms(seconds: float | None) -> str:
    """Seconds as a millisecond cell."""
    return "-" if seconds is None else f"{seconds * 1000:.1f} ms"

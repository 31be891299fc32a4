"""Scenario 1, warm continuation: TTFT of turn N via ``previous_response_id`` by history length.

One conversation is grown on superfluid through checkpoints of the configured
history lengths (each turn continued from the last, as a client would). At
each checkpoint a new turn is measured continuing the stored response (warm),
and the same turn is measured with the whole conversation resent:

- to superfluid, with a unique first line so no cached prefix serves it (what
  a cold server pays; the baseline of the ratio);
- to ``llama_cpp.server`` the same way (cold);
- to ``llama_cpp.server`` right after the same conversation's previous request
  (its single-sequence cache then holds the history: its best case).
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx

from ..client import StreamResult
from ..context import Context
from ..conversation import Conversation, nonce
from ..servers import Server
from ..turns import chat_whole, sf_build_turn, sf_continue, sf_whole
from .common import Section, median_of, ratio_of, spread, times, ttft_summary

REPLY_ALLOWANCE = 40  # tokens a building turn's reply and template add, about


@dataclass
class Checkpoint:
    """The conversation as it stood at one history length, and its measured turns."""

    target: int
    conv: Conversation
    users: list[str]  # the new user message of each repetition


async def _grow(ctx: Context, http: httpx.AsyncClient, server: Server) -> list[Checkpoint]:
    """Grow one conversation through every history length; snapshot each checkpoint."""
    chain = Conversation("chain")
    points = []
    for i, target in enumerate(ctx.cfg.histories):
        size = max(16, target - chain.tokens - REPLY_ALLOWANCE)
        await sf_build_turn(http, server, chain, ctx.tokenizer.text(size, seed=1000 + i))
        users = [
            ctx.tokenizer.text(ctx.cfg.turn_tokens, seed=5000 + 100 * i + rep)
            for rep in range(ctx.cfg.reps)
        ]
        snapshot = chain.copy(f"h{target}")
        snapshot.tokens = chain.tokens
        points.append(Checkpoint(target, snapshot, users))
        ctx.log(f"warm: checkpoint at {chain.tokens} tokens")
    return points


async def _superfluid(ctx: Context) -> tuple[list[Checkpoint], dict, dict]:
    """The checkpoints, and warm and cold (whole, uncached) TTFTs on superfluid at each."""
    warm: dict[int, list[StreamResult]] = {}
    cold: dict[int, list[StreamResult]] = {}
    out = ctx.cfg.ttft_output_tokens
    server = await ctx.superfluid()
    try:
        async with ctx.http() as http:
            points = await _grow(ctx, http, server)
            for p in points:
                warm[p.target] = [
                    await sf_continue(
                        http, server, p.conv.response_id or "", user, max_tokens=out, seed=rep
                    )
                    for rep, user in enumerate(p.users)
                ]
            for p in points:
                cold[p.target] = [
                    await sf_whole(
                        http, server, p.conv, user, max_tokens=out, seed=rep, nonce=nonce("cold")
                    )
                    for rep, user in enumerate(p.users)
                ]
                ctx.log(f"warm: superfluid cold at {p.target} done")
    finally:
        server.stop()
    return points, warm, cold


async def _llama_cpp(ctx: Context, points: list[Checkpoint]) -> tuple[dict, dict]:
    """Continued (its cache holds the history) and cold TTFTs on llama_cpp.server."""
    server = await ctx.llama_cpp_server()
    if server is None:
        return {}, {}
    continued: dict[int, list[StreamResult]] = {}
    cold: dict[int, list[StreamResult]] = {}
    out = ctx.cfg.ttft_output_tokens
    async with ctx.http() as http:
        for p in points:  # in order, so each priming only adds the new turns
            await chat_whole(http, server, p.conv, "prime", max_tokens=1, seed=0)
            continued[p.target] = [
                await chat_whole(http, server, p.conv, user, max_tokens=out, seed=rep)
                for rep, user in enumerate(p.users)
            ]
        for p in points:
            cold[p.target] = [
                await chat_whole(
                    http, server, p.conv, user, max_tokens=out, seed=rep, nonce=nonce("cold")
                )
                for rep, user in enumerate(p.users)
            ]
            ctx.log(f"warm: llama_cpp.server cold at {p.target} done")
    return continued, cold


async def run(ctx: Context) -> Section:
    """Measure warm continuation against cold resends; one table row per history length."""
    points, warm, cold = await _superfluid(ctx)
    continued, llama_cold = await _llama_cpp(ctx, points)
    section = Section(
        id="warm",
        title="1. Warm continuation: TTFT of turn N by history length",
        baseline="the same turn with the whole conversation resent to superfluid, uncached",
        columns=[
            "history (tokens)",
            "superfluid warm",
            "cold resend (baseline)",
            "warm / cold",
            "llama_cpp.server cold",
            "warm / llama_cpp cold",
            "llama_cpp.server continued",
            "warm / llama_cpp continued",
            "cached tokens (warm)",
        ],
    )
    for p in points:
        s_warm, s_cold = ttft_summary(warm[p.target]), ttft_summary(cold[p.target])
        s_lcold = ttft_summary(llama_cold.get(p.target, []))
        s_cont = ttft_summary(continued.get(p.target, []))
        cached = median_of([r.cached_tokens for r in warm[p.target]])
        ratios = [ratio_of(s_warm, s) for s in (s_cold, s_lcold, s_cont)]
        section.rows.append(
            [
                str(p.conv.tokens),
                spread(s_warm),
                spread(s_cold),
                times(ratios[0]),
                spread(s_lcold),
                times(ratios[1]),
                spread(s_cont),
                times(ratios[2]),
                str(cached),
            ]
        )
        section.data[str(p.target)] = {
            "history_tokens": p.conv.tokens,
            "warm": s_warm,
            "cold": s_cold,
            "llama_cpp_cold": s_lcold,
            "llama_cpp_continued": s_cont,
            "warm_over_cold": ratios[0],
            "warm_over_llama_cpp_cold": ratios[1],
            "warm_over_llama_cpp_continued": ratios[2],
            "cached_tokens": cached,
        }
    first, last = section.data[str(points[0].target)], section.data[str(points[-1].target)]
    section.data["flatness"] = ratio_of(last["warm"], first["warm"])
    section.notes.append(
        f"Warm TTFT at the longest history / at the shortest: {times(section.data['flatness'])}."
    )
    top = last["warm_over_cold"]
    section.target(
        f"warm TTFT <= 0.1 x cold at {points[-1].conv.tokens} tokens",
        times(top),
        None if top is None else top <= 0.1,
    )
    flat = section.data["flatness"]
    section.target(
        "warm TTFT flat in history (longest / shortest <= 1.5)",
        times(flat),
        None if flat is None else flat <= 1.5,
    )
    return section

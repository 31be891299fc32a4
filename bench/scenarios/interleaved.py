"""Scenario 2, interleaved conversations: TTFT when several conversations are continued round-robin.

Each conversation first gets a history of the configured length on
superfluid. Then they are continued in turn (4, then 8 of them): superfluid
via ``previous_response_id``; ``llama_cpp.server`` given each conversation
resent whole (its one sequence holds the conversation it served last, so
every turn after a switch is a full prompt); and, with
``--with-llama-server``, llama.cpp's C++ server with one slot per
conversation (after one unmeasured round that fills its slots).
"""

from __future__ import annotations

import httpx

from ..client import StreamResult
from ..context import Context
from ..conversation import Conversation
from ..servers import Server
from ..turns import BUILD_OUTPUT_TOKENS, chat_build_turn, sf_build_turn, sf_continue
from .common import Section, median_of, ratio_of, spread, times, ttft_summary

REPLY_ALLOWANCE = 50


def _user(ctx: Context, conv: int, rnd: int) -> str:
    """The new user message of conversation ``conv`` in round ``rnd`` (same on every server)."""
    return ctx.tokenizer.text(ctx.cfg.turn_tokens, seed=20_000 + 100 * conv + rnd)


async def _sf_rounds(
    ctx: Context, http: httpx.AsyncClient, server: Server, convs: list[Conversation], first: int
) -> list[StreamResult]:
    """Continue ``convs`` round-robin on superfluid; each turn joins its conversation."""
    results = []
    for rnd in range(first, first + ctx.cfg.interleaved_rounds):
        for i, conv in enumerate(convs):
            user = _user(ctx, i, rnd)
            r = await sf_continue(
                http,
                server,
                conv.response_id or "",
                user,
                max_tokens=BUILD_OUTPUT_TOKENS,
                seed=rnd,
                ban_eos=False,
            )
            results.append(r)
            if r.response_id:  # an incomplete turn is continued too (the server rebuilds it)
                conv.add(user, r.text)
                conv.response_id = r.response_id
    return results


async def _superfluid(ctx: Context) -> tuple[list[Conversation], dict[int, list[StreamResult]]]:
    """Build every conversation's history, then the round-robin for each count."""
    cfg = ctx.cfg
    server = await ctx.superfluid()
    try:
        async with ctx.http() as http:
            convs = []
            for i in range(max(cfg.interleaved_counts)):
                conv = Conversation(f"c{i}")
                size = cfg.interleaved_history - REPLY_ALLOWANCE
                await sf_build_turn(http, server, conv, ctx.tokenizer.text(size, seed=2000 + i))
                convs.append(conv)
            ctx.log(f"interleaved: {len(convs)} conversations built")
            snapshot = [c.copy(c.name) for c in convs]
            for c, s in zip(convs, snapshot, strict=True):
                s.tokens = c.tokens
            results, first = {}, 0
            for count in cfg.interleaved_counts:
                results[count] = await _sf_rounds(ctx, http, server, convs[:count], first)
                first += cfg.interleaved_rounds
    finally:
        server.stop()
    return snapshot, results


async def _chat_rounds(
    ctx: Context, server: Server, convs: list[Conversation], rounds: int, first: int
) -> list[StreamResult]:
    """Round-robin on a chat server, each conversation resent whole with its own replies."""
    results = []
    async with ctx.http() as http:
        for rnd in range(first, first + rounds):
            for i, conv in enumerate(convs):
                results.append(await chat_build_turn(http, server, conv, _user(ctx, i, rnd), rnd))
    return results


async def _llama_server(ctx: Context, base: list[Conversation], count: int) -> list[StreamResult]:
    """Round-robin on C++ llama-server with ``count`` slots, after a filling round."""
    server = await ctx.llama_server(count)
    if server is None:
        return []
    try:
        convs = [c.copy(c.name) for c in base[:count]]
        await _chat_rounds(ctx, server, convs, 1, -1)  # fills one slot per conversation
        return await _chat_rounds(ctx, server, convs, ctx.cfg.interleaved_rounds, 0)
    finally:
        server.stop()


async def run(ctx: Context) -> Section:
    """Measure round-robin TTFT against full resends; one table row per conversation count."""
    base, sf = await _superfluid(ctx)
    llama = await ctx.llama_cpp_server()
    section = Section(
        id="interleaved",
        title="2. Interleaved conversations: TTFT per turn, continued round-robin",
        baseline="llama_cpp.server given each conversation resent whole",
        columns=[
            "conversations",
            "history (tokens)",
            "superfluid",
            "cached tokens",
            "llama_cpp.server (baseline)",
            "speed-up vs llama_cpp.server",
            "llama-server (N slots)",
            "superfluid / llama-server",
        ],
    )
    for count in ctx.cfg.interleaved_counts:
        convs = [c.copy(c.name) for c in base[:count]]
        lc = await _chat_rounds(ctx, llama, convs, 1, 0) if llama else []
        ls = await _llama_server(ctx, base, count)
        ctx.log(f"interleaved: {count} conversations measured")
        s_sf, s_lc, s_ls = ttft_summary(sf[count]), ttft_summary(lc), ttft_summary(ls)
        speedup = ratio_of(s_lc, s_sf)
        vs_ls = ratio_of(s_sf, s_ls)
        history = median_of([c.tokens for c in base[:count]])
        cached = median_of([r.cached_tokens for r in sf[count]])
        cells = [str(count), str(history), spread(s_sf), str(cached), spread(s_lc)]
        section.rows.append([*cells, times(speedup), spread(s_ls), times(vs_ls)])
        section.data[str(count)] = {
            "history_tokens": history,
            "superfluid": s_sf,
            "cached_tokens": cached,
            "llama_cpp": s_lc,
            "llama_server": s_ls,
            "speedup_vs_llama_cpp": speedup,
            "superfluid_over_llama_server": vs_ls,
        }
    first = section.data[str(ctx.cfg.interleaved_counts[0])]
    up = first["speedup_vs_llama_cpp"]
    section.target(
        f">= 10x faster than llama_cpp.server, {ctx.cfg.interleaved_counts[0]} conversations",
        times(up),
        None if up is None else up >= 10,
    )
    for i, count in enumerate(ctx.cfg.interleaved_counts):
        rel = section.data[str(count)]["superfluid_over_llama_server"]
        wording = "no slower than" if i == 0 else "ahead of"
        section.target(
            f"{wording} llama-server at {count} conversations (superfluid / llama-server TTFT)",
            times(rel),
            None if rel is None else (rel <= 1.0 if i == 0 else rel < 1.0),
        )
    section.notes.append(
        "llama_cpp.server is measured for one round (every turn follows a switch, so every "
        "turn is a full prompt); superfluid for "
        f"{ctx.cfg.interleaved_rounds} rounds."
    )
    return section

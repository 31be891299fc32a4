"""Scenario 2, interleaved conversations: TTFT when several conversations are continued round-robin.

Conversations get a history of the configured length on superfluid (4, then
4 more), and are continued in turn (4, then all 8): superfluid via
``previous_response_id``; ``llama_cpp.server`` given each conversation resent
whole (its one sequence holds the conversation it served last, so every turn
after a switch is a full prompt); and, with
``--with-llama-server``, llama.cpp's C++ server with one slot per
conversation (after one unmeasured round that fills its slots). The same
superfluid rounds run again on a server that parks nothing (``--cache-ram 0
--cache-disk 0``).
"""

from __future__ import annotations

from typing import Any

import httpx

from bench.client import StreamResult
from bench.context import Context
from bench.conversation import Conversation
from bench.scenarios.common import Section, median_of, ratio_of, spread, times, ttft_summary
from bench.servers import Server
from bench.turns import BUILD_OUTPUT_TOKENS, SHORT, chat_build_turn, sf_build_turn, sf_continue

REPLY_ALLOWANCE = 50
NO_PARKING = ("--cache-ram=0", "--cache-disk=0")


def _user(ctx: Context, conv: int, rnd: int) -> str:
    """The new user message of conversation ``conv`` in round ``rnd`` (same on every server)."""
    return ctx.tokenizer.text(ctx.cfg.turn_tokens, seed=20_000 + 100 * conv + rnd)


async def _sf_turn(
    http: httpx.AsyncClient, server: Server, conv: Conversation, user: str, seed: int
) -> StreamResult:
    """Continue ``conv`` on superfluid; the turn joins it (an incomplete one too: it is rebuilt)."""
    previous = conv.response_id or ""
    r = await sf_continue(
        http, server, previous, user, max_tokens=BUILD_OUTPUT_TOKENS, seed=seed, eos_bias=SHORT
    )
    if r.response_id:
        conv.add(user, r.text)
        conv.response_id = r.response_id
    return r


async def _build(
    ctx: Context, http: httpx.AsyncClient, server: Server, convs: list[Conversation], count: int
) -> None:
    """Give conversations ``len(convs)..count-1`` their history on superfluid."""
    while len(convs) < count:
        conv = Conversation(f"c{len(convs)}")
        text = ctx.tokenizer.text(ctx.cfg.interleaved_history - REPLY_ALLOWANCE, 2000 + len(convs))
        await sf_build_turn(http, server, conv, text)
        convs.append(conv)
    ctx.log(f"interleaved: {count} conversations built")


async def _measure(ctx: Context) -> tuple[list[Conversation], dict[int, dict[str, list]]]:
    """Per count: build up to that many conversations, then continue them round-robin.

    Each superfluid turn of the first round is followed by the same turn on
    llama_cpp.server, so a burst of load from elsewhere hits both alike.
    """
    cfg = ctx.cfg
    llama = await ctx.llama_cpp_server()
    server = await ctx.superfluid()
    convs: list[Conversation] = []  # superfluid's
    base: list[Conversation] = []  # each as built (for llama-server)
    theirs: list[Conversation] = []  # llama_cpp.server's copies, continued with its own replies
    out: dict[int, dict[str, list]] = {}
    try:
        async with ctx.http() as http:
            for first, count in enumerate(cfg.interleaved_counts):
                await _build(ctx, http, server, convs, count)
                for c in convs[len(base) :]:
                    base.append(c.copy(c.name))
                    base[-1].tokens = c.tokens
                    theirs.append(c.copy(c.name))
                res: dict[str, list] = {"superfluid": [], "llama_cpp": []}
                for rnd in range(
                    first * cfg.interleaved_rounds, (first + 1) * cfg.interleaved_rounds
                ):
                    for i in range(count):
                        user = _user(ctx, i, rnd)
                        res["superfluid"].append(await _sf_turn(http, server, convs[i], user, rnd))
                        if llama is not None and rnd == first * cfg.interleaved_rounds:
                            r = await chat_build_turn(http, llama, theirs[i], user, rnd)
                            res["llama_cpp"].append(r)
                out[count] = res
                ctx.log(f"interleaved: {count} conversations measured")
    finally:
        server.stop()
    return base, out


async def _no_parking(ctx: Context) -> dict[int, list[StreamResult]]:
    """The same superfluid rounds on a server that parks nothing (``--cache-ram 0``, no disk)."""
    cfg = ctx.cfg
    server = await ctx.superfluid(extra=NO_PARKING)
    convs: list[Conversation] = []
    out: dict[int, list[StreamResult]] = {}
    try:
        async with ctx.http() as http:
            for first, count in enumerate(cfg.interleaved_counts):
                await _build(ctx, http, server, convs, count)
                out[count] = []
                for rnd in range(
                    first * cfg.interleaved_rounds, (first + 1) * cfg.interleaved_rounds
                ):
                    for i in range(count):
                        user = _user(ctx, i, rnd)
                        out[count].append(await _sf_turn(http, server, convs[i], user, rnd))
    finally:
        server.stop()
    ctx.log("interleaved: measured without parking")
    return out


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
    base, measured = await _measure(ctx)
    plain = await _no_parking(ctx)
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
            "superfluid without parking",
            "with / without parking",
        ],
    )
    for count in ctx.cfg.interleaved_counts:
        ls = await _llama_server(ctx, base, count)
        res = measured[count]
        data = _summarise(base[:count], res["superfluid"], res["llama_cpp"], ls)
        data["no_parking"] = ttft_summary(plain[count])
        data["parking_over_no_parking"] = ratio_of(data["superfluid"], data["no_parking"])
        section.data[str(count)] = data
        cells = [str(count), str(data["history_tokens"]), spread(data["superfluid"])]
        cells += [str(data["cached_tokens"]), spread(data["llama_cpp"])]
        cells += [times(data["speedup_vs_llama_cpp"]), spread(data["llama_server"])]
        cells += [times(data["superfluid_over_llama_server"]), spread(data["no_parking"])]
        section.rows.append([*cells, times(data["parking_over_no_parking"])])
    _judge(section, ctx.cfg.interleaved_counts)
    section.notes.append(
        f"superfluid: {ctx.cfg.interleaved_rounds} rounds per count; llama_cpp.server: the "
        "first round, each turn right after superfluid's (every one of its turns follows a "
        "switch of conversation, so every one is a full prompt). The 8-conversation rows "
        "continue the 4 conversations and add 4."
    )
    return section


def _summarise(
    base: list[Conversation], sf: list[StreamResult], lc: list[StreamResult], ls: list[StreamResult]
) -> dict[str, Any]:
    """Summaries and ratios for one conversation count."""
    s_sf, s_lc, s_ls = ttft_summary(sf), ttft_summary(lc), ttft_summary(ls)
    return {
        "history_tokens": median_of([c.tokens for c in base]),
        "superfluid": s_sf,
        "cached_tokens": median_of([r.cached_tokens for r in sf]),
        "llama_cpp": s_lc,
        "llama_server": s_ls,
        "speedup_vs_llama_cpp": ratio_of(s_lc, s_sf),
        "superfluid_over_llama_server": ratio_of(s_sf, s_ls),
    }


def _judge(section: Section, counts: tuple[int, ...]) -> None:
    """The targets: >= 10x llama_cpp.server; no slower than llama-server, then ahead."""
    up = section.data[str(counts[0])]["speedup_vs_llama_cpp"]
    section.target(
        f">= 10x faster than llama_cpp.server, {counts[0]} conversations",
        times(up),
        None if up is None else up >= 10,
    )
    for i, count in enumerate(counts):
        rel = section.data[str(count)]["superfluid_over_llama_server"]
        wording = "no slower than" if i == 0 else "ahead of"
        section.target(
            f"{wording} llama-server at {count} conversations (superfluid / llama-server TTFT)",
            times(rel),
            None if rel is None else (rel <= 1.0 if i == 0 else rel < 1.0),
        )

"""Scenario 7, a remote llama-server: superfluid over it vs that llama-server alone.

Two llama-servers of the same build and settings (one slot per conversation) serve
the bench model. Superfluid serves the first as ``--model bench=llama-server:URL``:
conversations get a history through superfluid, then are continued round-robin by
``previous_response_id``, so each prompt goes to the remote as the exact token ids it
last served (warm from its cache; ``cached_tokens`` is the remote's own count). The
second is given the same conversations whole through its own ``/v1/chat/completions``
(after an unmeasured request that puts each history in its cache), as a client of
llama-server alone would. Each superfluid turn is followed by the same turn on the
llama-server alone, so a burst of load from elsewhere hits both alike.
"""

from __future__ import annotations

from typing import Any

import httpx

from bench import servers
from bench.client import StreamResult
from bench.context import Context
from bench.conversation import Conversation
from bench.scenarios.common import (
    Section,
    median_of,
    paired_overhead,
    ratio_of,
    spread,
    times,
    ttft_summary,
)
from bench.servers import Server
from bench.turns import (
    BUILD_OUTPUT_TOKENS,
    SHORT,
    chat_build_turn,
    chat_whole,
    sf_build_turn,
    sf_continue,
    warm_up,
)

REPLY_ALLOWANCE = 50
TTFT_OVERHEAD_TARGET = 1.10


def _user(ctx: Context, conv: int, rnd: int) -> str:
    """The new user message of conversation ``conv`` in round ``rnd`` (same on both)."""
    return ctx.tokenizer.text(ctx.cfg.turn_tokens, seed=30_000 + 100 * conv + rnd)


async def _superfluid_over(ctx: Context, remote: Server) -> Server:
    """A warmed-up standalone superfluid serving the bench model from ``remote``."""
    server = servers.start_superfluid_over(remote.url, ctx.workdir)
    async with ctx.http() as http:
        await warm_up(http, server, "superfluid")
    return server


async def _build(
    ctx: Context, http: httpx.AsyncClient, sf: Server, alone: Server, count: int
) -> tuple[list[Conversation], list[Conversation]]:
    """``count`` conversations with a history: superfluid's, and copies for llama-server."""
    ours, theirs = [], []
    for i in range(count):
        conv = Conversation(f"r{i}")
        text = ctx.tokenizer.text(ctx.cfg.interleaved_history - REPLY_ALLOWANCE, 3000 + i)
        await sf_build_turn(http, sf, conv, text)
        ours.append(conv)
        theirs.append(conv.copy(conv.name))
        # Into the cache of llama-server alone, as its client's previous turn would be.
        await chat_whole(http, alone, theirs[-1], "ok", max_tokens=1, seed=i)
    ctx.log(f"remote: {count} conversations built")
    return ours, theirs


async def _sf_turn(
    http: httpx.AsyncClient, sf: Server, conv: Conversation, user: str, seed: int
) -> StreamResult:
    """Continue ``conv`` on superfluid by id; the turn joins it."""
    r = await sf_continue(
        http,
        sf,
        conv.response_id or "",
        user,
        max_tokens=BUILD_OUTPUT_TOKENS,
        seed=seed,
        eos_bias=SHORT,
    )
    r.extra["previous_tokens"] = conv.tokens  # the turn continued, as counted when stored
    if r.response_id and r.status == "completed":
        conv.add(user, r.text)
        conv.response_id = r.response_id
        conv.tokens = (r.input_tokens or 0) + (r.output_tokens or 0)
    return r


async def _measure(ctx: Context, count: int) -> dict[str, Any] | None:
    """Round-robin turns on superfluid-over-remote and on llama-server alone, alternating."""
    remote = await ctx.llama_server(count)
    if remote is None:
        return None
    alone = await ctx.llama_server(count)
    assert alone is not None
    sf = await _superfluid_over(ctx, remote)
    res: dict[str, Any] = {"superfluid": [], "alone": []}
    try:
        async with ctx.http() as http:
            ours, theirs = await _build(ctx, http, sf, alone, count)
            res["history"] = median_of([c.tokens for c in ours])
            for rnd in range(ctx.cfg.remote_rounds):
                for i in range(count):
                    user = _user(ctx, i, rnd)
                    res["superfluid"].append(await _sf_turn(http, sf, ours[i], user, rnd))
                    res["alone"].append(await chat_build_turn(http, alone, theirs[i], user, rnd))
        ctx.log(f"remote: {count} conversations measured")
    finally:
        for server in (sf, remote, alone):
            server.stop()
    return res


async def run(ctx: Context) -> Section:
    """One row per conversation count: TTFT through superfluid and alone, cached tokens."""
    section = Section(
        id="remote",
        title="7. A remote llama-server: superfluid over it vs llama-server alone",
        baseline="llama-server alone, each conversation resent whole (its own prompt cache)",
        columns=[
            "conversations",
            "history (tokens)",
            "superfluid over llama-server",
            "cached tokens (remote's count)",
            "prompt tokens",
            "llama-server alone (baseline)",
            "superfluid / alone",
        ],
    )
    for count in ctx.cfg.interleaved_counts:
        measured = await _measure(ctx, count)
        if measured is None:
            section.rows.append([str(count), "-", "-", "-", "-", "-", "-"])
            continue
        data = _summarise(measured["superfluid"], measured["alone"])
        data["history_tokens"] = measured["history"]
        section.data[str(count)] = data
        section.rows.append(
            [
                str(count),
                str(data["history_tokens"]),
                spread(data["superfluid"]),
                str(data["cached_tokens"]),
                str(data["prompt_tokens"]),
                spread(data["alone"]),
                times(data["superfluid_over_alone"]),
            ]
        )
    _judge(section, ctx.cfg.interleaved_counts)
    paired = [
        f"{count} conversations {times(data.get('paired_overhead'))}"
        for count, data in section.data.items()
    ]
    if paired:
        section.notes.append(
            "Paired (1 + the median of each turn's TTFT minus llama-server alone's same turn, "
            "over llama-server alone's median): " + ", ".join(paired) + "."
        )
    if not section.data:
        section.notes.append("not run: pass --with-llama-server to build and compare with it")
    section.notes.append(
        f"{ctx.cfg.remote_rounds} rounds per count; superfluid continues by "
        "previous_response_id, llama-server alone gets the conversation resent whole. "
        "Superfluid adds an HTTP hop and its own rendering; it tokenizes from the served GGUF "
        "(no /tokenize round trip)."
    )
    return section


def _summarise(sf: list[StreamResult], alone: list[StreamResult]) -> dict[str, Any]:
    """Summaries and the ratio for one conversation count."""
    s_sf, s_alone = ttft_summary(sf), ttft_summary(alone)
    return {
        "superfluid": s_sf,
        "cached_tokens": median_of([r.cached_tokens for r in sf]),
        "prompt_tokens": median_of([r.input_tokens for r in sf]),
        "warm_fraction": _warm_fraction(sf),
        "alone": s_alone,
        "superfluid_over_alone": ratio_of(s_sf, s_alone),
        "paired_overhead": paired_overhead(sf, alone),
    }


def _warm_fraction(results: list[StreamResult]) -> float | None:
    """The smallest share of the continued turn that the remote reported it reused."""
    shares = [
        r.cached_tokens / r.extra["previous_tokens"]
        for r in results
        if r.cached_tokens is not None and r.extra.get("previous_tokens")
    ]
    return round(min(shares), 3) if shares else None


def _judge(section: Section, counts: tuple[int, ...]) -> None:
    """The targets: TTFT overhead <= 10%; every continuation reported warm."""
    for count in counts:
        data = section.data.get(str(count))
        rel = data["superfluid_over_alone"] if data else None
        section.target(
            f"TTFT overhead <= 10% over llama-server alone, {count} conversations",
            times(rel),
            None if rel is None else rel <= TTFT_OVERHEAD_TARGET,
        )
        warm = data["warm_fraction"] if data else None
        section.target(
            f"continuations reported warm by the remote, {count} conversations",
            "-" if warm is None else f"at least {warm:.0%} of each continued turn cached",
            None if warm is None else warm >= 0.9,
        )

"""Scenario 1, warm continuation: TTFT of turn N via ``previous_response_id`` by history length.

One conversation is grown on superfluid through checkpoints of the configured
history lengths (each turn continued from the last, as a client would). At
each checkpoint, as soon as it is reached, a new turn is measured continuing
the stored response (warm), and the same turn is measured with the whole
conversation resent:

- to a freshly started superfluid (a cold server; the baseline of the ratio);
- to ``llama_cpp.server`` with a unique first line, so its cache cannot
  serve it (cold);
- to ``llama_cpp.server`` right after the same conversation's previous request
  (its single-sequence cache then holds the history: its best case);
- to C++ ``llama-server`` with one slot, likewise right after the conversation (its
  prompt cache holds the history), which shows how much of a warm turn's growth in
  history is llama.cpp's own: attention over every cached token.

Repetitions alternate between superfluid and its baselines, so a burst of load
from elsewhere on a shared machine hits both sides alike. A second superfluid that
parks nothing (``--cache-ram 0 --cache-disk 0``) grows the same conversation and takes
each warm turn beside the first, so the two are measured alike, side by side; the two
take turns at going first (the first after the baselines' turns, the second after it),
which the lone-turn target compares.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import httpx

from bench.client import StreamResult
from bench.context import Context
from bench.conversation import Conversation, nonce
from bench.engine_counters import counted, described
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
from bench.turns import chat_whole, sf_build_turn, sf_continue

REPLY_ALLOWANCE = 40  # tokens a building turn's reply and template add, about
NO_PARKING = ("--cache-ram=0", "--cache-disk=0")


@dataclass
class Checkpoint:
    """The conversation as it stood at one history length, and its measured turns."""

    target: int
    conv: Conversation
    users: list[str]  # the new user message of each repetition
    plain: Conversation  # the same conversation on the server that parks nothing


@dataclass
class Measured:
    """TTFTs per checkpoint (by target history length) of each series."""

    warm: dict[int, list[StreamResult]] = field(default_factory=dict)
    cold: dict[int, list[StreamResult]] = field(default_factory=dict)
    continued: dict[int, list[StreamResult]] = field(default_factory=dict)
    llama_cold: dict[int, list[StreamResult]] = field(default_factory=dict)
    cpp_continued: dict[int, list[StreamResult]] = field(default_factory=dict)
    no_parking: dict[int, list[StreamResult]] = field(default_factory=dict)
    # The engine's KV operations during the measured turns, per checkpoint, of each server.
    kv_ops: dict[int, dict[str, dict[str, int]]] = field(default_factory=dict)


async def _checkpoint(
    ctx: Context,
    http: httpx.AsyncClient,
    servers: tuple[Server, Server, Server | None, Server | None],
    p: Checkpoint,
    ops: dict[str, dict[str, int]],
) -> dict[str, list[StreamResult]]:
    """Measure one checkpoint, each superfluid repetition next to its baselines'.

    Side by side, so a burst of load from elsewhere hits both sides alike; the two
    superfluid servers take turns at going first. ``ops``
    gets the KV operations of the two superfluid servers' measured turns.
    """
    server, plain, llama, cpp = servers
    out = ctx.cfg.ttft_output_tokens
    names = ("warm", "cold", "continued", "llama_cold", "cpp_continued", "no_parking")
    t: dict[str, list[StreamResult]] = {name: [] for name in names}
    for resident in (llama, cpp):  # its cache now holds this conversation
        if resident is not None:
            await chat_whole(http, resident, p.conv, "prime", max_tokens=1, seed=0)
    pair = (("warm", server, p.conv), ("no_parking", plain, p.plain))
    for rep, user in enumerate(p.users):
        # Taking turns at going first: the first of the two follows the baselines' turns
        # (their compute threads may still be spinning), the second follows the first.
        for name, on, conv in pair if rep % 2 == 0 else pair[::-1]:
            turn = sf_continue(http, on, conv.response_id or "", user, max_tokens=out, seed=rep)
            t[name].append(await counted(http, on, ops[name], turn))
        for name, other in (("continued", llama), ("cpp_continued", cpp)):
            if other is not None:
                t[name].append(
                    await chat_whole(http, other, p.conv, user, max_tokens=out, seed=rep)
                )
    for rep, user in enumerate(p.users[: ctx.cfg.cold_reps]):
        t["cold"].append(await cold_turn(ctx, p.conv, user, out, rep))
        if llama is not None:
            tag = nonce("cold")
            t["llama_cold"].append(
                await chat_whole(http, llama, p.conv, user, max_tokens=out, seed=rep, nonce=tag)
            )
    return t


async def _measure(ctx: Context) -> tuple[list[Checkpoint], Measured]:
    """Grow one conversation through every history length, measuring at each checkpoint.

    Each checkpoint is measured as soon as it is reached, so superfluid's cache
    then holds that much history (plus the earlier checkpoints' short branches).
    """
    llama = await ctx.llama_cpp_server()
    cpp = await ctx.llama_server(1)
    server = await ctx.superfluid()
    plain = await ctx.superfluid(extra=NO_PARKING)
    chains = Conversation("chain"), Conversation("chain")
    points, measured = [], Measured()
    try:
        async with ctx.http() as http:
            for i, target in enumerate(ctx.cfg.histories):
                size = max(16, target - chains[0].tokens - REPLY_ALLOWANCE)
                text = ctx.tokenizer.text(size, seed=1000 + i)
                for on, chain in zip((server, plain), chains, strict=True):
                    await sf_build_turn(http, on, chain, text)
                snapshot, plain_snapshot = (c.copy(f"h{target}") for c in chains)
                snapshot.tokens = chains[0].tokens
                users = [
                    ctx.tokenizer.text(ctx.cfg.turn_tokens, seed=5000 + 100 * i + rep)
                    for rep in range(ctx.cfg.warm_reps)
                ]
                points.append(Checkpoint(target, snapshot, users, plain_snapshot))
                ops: dict[str, dict[str, int]] = {"warm": {}, "no_parking": {}}
                measured.kv_ops[target] = ops
                for name, results in (
                    await _checkpoint(ctx, http, (server, plain, llama, cpp), points[-1], ops)
                ).items():
                    getattr(measured, name)[target] = results
                ctx.log(f"warm: checkpoint at {chains[0].tokens} tokens measured")
    finally:
        server.stop()
        plain.stop()
        if cpp is not None:
            cpp.stop()
    return points, measured


async def run(ctx: Context) -> Section:
    """Measure warm continuation against cold resends; one table row per history length."""
    points, m = await _measure(ctx)
    section = Section(
        id="warm",
        title="1. Warm continuation: TTFT of turn N by history length",
        baseline="the same turn with the whole conversation sent to a freshly started superfluid",
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
            "warm without parking",
            "llama-server continued (1 slot)",
            "warm / llama-server continued",
        ],
    )
    for p in points:
        data = _point(p, m)
        data["warm_no_parking"] = ttft_summary(m.no_parking[p.target])
        section.data[str(p.target)] = data
        section.rows.append(
            [
                str(p.conv.tokens),
                spread(data["warm"]),
                spread(data["cold"]),
                times(data["warm_over_cold"]),
                spread(data["llama_cpp_cold"]),
                times(data["warm_over_llama_cpp_cold"]),
                spread(data["llama_cpp_continued"]),
                times(data["warm_over_llama_cpp_continued"]),
                str(data["cached_tokens"]),
                spread(data["warm_no_parking"]),
                spread(data["llama_server_continued"]),
                times(data["warm_over_llama_server_continued"]),
            ]
        )
    _judge(section, points)
    section.data["kv_ops"] = {str(k): v for k, v in m.kv_ops.items()}
    section.notes.append(
        "The engine's KV operations during the measured warm turns, with parking / without: "
        + "; ".join(
            f"at {p.conv.tokens} tokens {described(m.kv_ops[p.target]['warm'])} / "
            f"{described(m.kv_ops[p.target]['no_parking'])}"
            for p in points
        )
        + "."
    )
    return section


def _point(p: Checkpoint, m: Measured) -> dict:
    """The summaries and ratios at one checkpoint."""
    s_warm, s_cold = ttft_summary(m.warm[p.target]), ttft_summary(m.cold[p.target])
    s_lcold = ttft_summary(m.llama_cold.get(p.target, []))
    s_cont = ttft_summary(m.continued.get(p.target, []))
    s_cpp = ttft_summary(m.cpp_continued.get(p.target, []))
    return {
        "history_tokens": p.conv.tokens,
        "warm": s_warm,
        "cold": s_cold,
        "llama_cpp_cold": s_lcold,
        "llama_cpp_continued": s_cont,
        "warm_over_cold": ratio_of(s_warm, s_cold),
        "warm_over_llama_cpp_cold": ratio_of(s_warm, s_lcold),
        "warm_over_llama_cpp_continued": ratio_of(s_warm, s_cont),
        "llama_server_continued": s_cpp,
        "warm_over_llama_server_continued": ratio_of(s_warm, s_cpp),
        "cached_tokens": median_of([r.cached_tokens for r in m.warm[p.target]]),
    }


def _judge(section: Section, points: list[Checkpoint]) -> None:
    """Flatness in history, and the targets."""
    first, last = section.data[str(points[0].target)], section.data[str(points[-1].target)]
    flat = section.data["flatness"] = ratio_of(last["warm"], first["warm"])
    section.notes.append(f"Warm TTFT at the longest history / at the shortest: {times(flat)}.")
    cpp = section.data["llama_server_flatness"] = ratio_of(
        last["llama_server_continued"], first["llama_server_continued"]
    )
    if cpp is not None:
        section.notes.append(
            f"llama-server's own continued turn, longest / shortest: {times(cpp)} (the growth"
            " llama.cpp itself has: each new token attends over every cached one)."
        )
    top = last["warm_over_cold"]
    section.target(
        f"warm TTFT <= 0.1 x cold at {points[-1].conv.tokens} tokens",
        times(top),
        None if top is None else top <= 0.1,
    )
    section.target(
        "warm TTFT flat in history (longest / shortest <= 1.5)",
        times(flat),
        None if flat is None else flat <= 1.5,
    )
    lone = section.data["parking_cost"] = ratio_of(last["warm"], last["warm_no_parking"])
    section.target(
        f"lone warm turn with parking <= 1.05 x without, at {points[-1].conv.tokens} tokens",
        times(lone),
        None if lone is None else lone <= 1.05,
    )

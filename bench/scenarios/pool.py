"""Scenario 8, a pool of two llama-server replicas: conversation affinity vs round-robin.

Two llama-servers of the same build and settings (one slot per conversation each)
serve the bench model; superfluid serves them as one model,
``--model bench=llama-server:URL1,URL2``. Conversations get a history through
superfluid, then are continued by ``previous_response_id`` for a few rounds, each
round in a shuffled order (the same orders for both routings), as users come back.
With ``--pool-routing affinity`` (the default) each continuation goes to the replica
that served its previous turn, which holds its prefix; with ``--pool-routing
round-robin`` (a benchmarking aid) each generation goes to the next replica, so a
continuation finds its prefix only when it happens to land where it was served. The
routings run one after the other, each on a fresh pair of replicas; ``cached tokens``
is the remotes' own count.
"""

from __future__ import annotations

import random
from typing import Any

import httpx

from bench import servers
from bench.client import StreamResult
from bench.context import Context
from bench.conversation import Conversation
from bench.model import MODEL_ID
from bench.scenarios.common import Section, median_of, ratio_of, spread, times, ttft_summary
from bench.servers import Server
from bench.turns import BUILD_OUTPUT_TOKENS, SHORT, sf_build_turn, sf_continue, warm_up

REPLY_ALLOWANCE = 50
ROUTINGS = ("affinity", "round-robin")
WARM_TARGET = 0.95  # of a continued turn's prompt, cached by the replica it goes to


def _user(ctx: Context, conv: int, rnd: int) -> str:
    """The new user message of conversation ``conv`` in round ``rnd`` (same for both)."""
    return ctx.tokenizer.text(ctx.cfg.turn_tokens, seed=40_000 + 100 * conv + rnd)


async def _sf_turn(
    http: httpx.AsyncClient, sf: Server, conv: Conversation, user: str, seed: int
) -> StreamResult:
    """Continue ``conv`` on superfluid by id; the turn joins it when it ends normally."""
    r = await sf_continue(
        http,
        sf,
        conv.response_id or "",
        user,
        max_tokens=BUILD_OUTPUT_TOKENS,
        seed=seed,
        eos_bias=SHORT,
    )
    if r.response_id and r.status == "completed":
        conv.add(user, r.text)
        conv.response_id = r.response_id
        conv.tokens = (r.input_tokens or 0) + (r.output_tokens or 0)
    return r


async def _measure(ctx: Context, count: int, routing: str) -> dict[str, Any] | None:
    """Build ``count`` conversations on a fresh pool, then continue them in shuffled rounds."""
    first = await ctx.llama_server(count)
    if first is None:
        return None
    second = await ctx.llama_server(count)
    assert second is not None
    pool = f"{first.url},{second.url}"
    sf = servers.start_superfluid_over(pool, ctx.workdir, (f"--pool-routing={routing}",))
    res: dict[str, Any] = {"turns": []}
    try:
        async with ctx.http() as http:
            await warm_up(http, sf, "superfluid")
            convs = []
            for i in range(count):
                conv = Conversation(f"p{i}")
                text = ctx.tokenizer.text(ctx.cfg.interleaved_history - REPLY_ALLOWANCE, 4000 + i)
                await sf_build_turn(http, sf, conv, text)
                convs.append(conv)
            res["history"] = median_of([c.tokens for c in convs])
            for rnd in range(ctx.cfg.interleaved_rounds):
                order = list(range(count))
                random.Random(rnd).shuffle(order)
                for i in order:
                    turn = await _sf_turn(http, sf, convs[i], _user(ctx, i, rnd), rnd)
                    res["turns"].append(turn)
            res["replicas"] = await _replicas(http, sf)
        ctx.log(f"pool: {count} conversations measured, {routing}")
    finally:
        for server in (sf, first, second):
            server.stop()
    return res


async def _replicas(http: httpx.AsyncClient, sf: Server) -> list[dict[str, Any]]:
    """The pool's replicas as superfluid's ``/v1/models`` shows them at the end."""
    r = await http.get(f"{sf.url}/v1/models/{MODEL_ID}", headers=sf.headers)
    shown = r.json()["superfluid"].get("replicas") or []
    keep = ("health", "in_flight", "conversations", "served")
    return [{k: s.get(k) for k in keep} for s in shown]


def _summarise(turns: list[StreamResult]) -> dict[str, Any]:
    """TTFT and the cached share of the continued turns' prompts."""
    shares = [
        r.cached_tokens / r.input_tokens
        for r in turns
        if r.cached_tokens is not None and r.input_tokens
    ]
    cached = sum(r.cached_tokens or 0 for r in turns)
    prompt = sum(r.input_tokens or 0 for r in turns)
    return {
        "ttft": ttft_summary(turns),
        "cached_tokens": median_of([r.cached_tokens for r in turns]),
        "prompt_tokens": median_of([r.input_tokens for r in turns]),
        "cached_share": round(cached / prompt, 3) if prompt else None,
        "min_share": round(min(shares), 3) if shares else None,
        "cold_turns": sum(1 for s in shares if s < 0.5),
        "turns": len(turns),
    }


async def run(ctx: Context) -> Section:
    """One row per routing: TTFT and the cached share, side by side."""
    section = Section(
        id="pool",
        title="8. A pool of two llama-server replicas: conversation affinity vs round-robin",
        baseline="round-robin routing over the same two replicas (--pool-routing round-robin)",
        columns=[
            "routing",
            "conversations",
            "history (tokens)",
            "TTFT",
            "cached tokens (remotes' count)",
            "prompt tokens",
            "cached / prompt",
            "cold turns",
            "TTFT vs affinity",
        ],
    )
    count = max(ctx.cfg.interleaved_counts)
    for routing in ROUTINGS:
        measured = await _measure(ctx, count, routing)
        if measured is None:
            section.rows.append([routing, str(count), *["-"] * 7])
            continue
        data = _summarise(measured["turns"])
        data["history_tokens"] = measured["history"]
        data["replicas"] = measured["replicas"]
        section.data[routing] = data
    _rows(section, count)
    _judge(section)
    if not section.data:
        section.notes.append("not run: pass --with-llama-server to build and compare with it")
    section.notes.append(
        f"{ctx.cfg.interleaved_rounds} rounds, each continuing every conversation once in a "
        "shuffled order; cached / prompt is over all continued turns; a cold turn had less "
        "than half its prompt cached. Each routing runs on a fresh pair of replicas."
    )
    return section


def _rows(section: Section, count: int) -> None:
    """The table rows of the routings measured."""
    base = section.data.get("affinity")
    for routing, data in section.data.items():
        rel = ratio_of(data["ttft"], base["ttft"]) if base else None
        share = data["cached_share"]
        section.rows.append(
            [
                routing,
                str(count),
                str(data["history_tokens"]),
                spread(data["ttft"]),
                str(data["cached_tokens"]),
                str(data["prompt_tokens"]),
                "-" if share is None else f"{share:.3f}",
                f"{data['cold_turns']} of {data['turns']}",
                times(rel),
            ]
        )


def _judge(section: Section) -> None:
    """The target: with affinity, continued turns are served >= 95% from cache."""
    data = section.data.get("affinity") or {}
    share = data.get("cached_share")
    section.target(
        f"affinity: continued turns' cached tokens >= {WARM_TARGET:.0%} of their prompts",
        "-" if share is None else f"{share:.1%} (lowest turn {data['min_share'] or 0:.1%})",
        None if share is None else share >= WARM_TARGET,
    )
    rr = section.data.get("round-robin")
    if data and rr and rr["cached_share"] is not None:
        section.target(
            "round-robin: a fraction of affinity's cached share",
            f"{rr['cached_share']:.1%} vs {share:.1%}",
            rr["cached_share"] < share,
        )

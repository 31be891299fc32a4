"""Scenario 12, the chat panel's path: a turn as the panel makes it vs the same turn by API.

The panel (``labextension/src/chat/model.ts``) sends each turn as a streamed
``POST /v1/responses`` with ``conversation`` (the server finds the head and moves it),
then reads the conversation, its items and its response tree again to show them. The
API path continues the same history by ``previous_response_id`` and reads nothing
after. Both run the same inputs and seeds, with the end token banned, so each turn
generates the same number of tokens on either path.

Per turn: TTFT, and the whole turn (from sending to the panel's reads answered, or to
the stream's end for the API). Target: the panel's turn costs at most 10 ms over the
API's, median against median.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx

from bench.client import StreamResult, stream_response
from bench.context import Context
from bench.model import MODEL_ID, eos_logit_bias
from bench.scenarios.common import Section, http_chain, spread, ttft_summary
from bench.servers import Server
from bench.stats import summary

TURNS = 8
OUTPUT_TOKENS = 24
TARGET_S = 0.010


def _body(i: int) -> dict[str, Any]:
    return {
        "model": MODEL_ID,
        "input": f"Turn {i}: what does the cell above compute?",
        "max_output_tokens": OUTPUT_TOKENS,
        "seed": i,
        "logit_bias": eos_logit_bias(-100),  # the same length on either path
    }


async def _panel_reads(http: httpx.AsyncClient, server: Server, conv: str) -> None:
    """What the panel reads after each answer, as it does: the three at once."""
    base = f"{server.url}/v1/conversations/{conv}"
    answers = await asyncio.gather(
        http.get(base, headers=server.headers),
        http.get(base + "/items", params={"order": "asc", "limit": 100}, headers=server.headers),
        http.get(base + "/responses", headers=server.headers),
    )
    for answer in answers:
        answer.raise_for_status()


async def _panel_loop(ctx: Context, server: Server, turns: int) -> list[StreamResult]:
    out = []
    async with ctx.http() as http:
        created = await http.post(server.url + "/v1/conversations", json={}, headers=server.headers)
        conv = created.raise_for_status().json()["id"]
        for i in range(turns):
            started = time.monotonic()
            body = {**_body(i), "conversation": conv}
            result = await stream_response(http, server.url + "/v1/responses", body, server.headers)
            await _panel_reads(http, server, conv)
            result.total = time.monotonic() - started
            out.append(result)
    return out


async def run(ctx: Context) -> Section:
    """Run both loops ``reps`` times, alternating, on one server; build the section."""
    turns = TURNS if ctx.cfg.name == "full" else 3
    server = await ctx.superfluid()
    series: dict[str, list[StreamResult]] = {"api": [], "panel": []}
    try:
        for _ in range(ctx.cfg.reps):
            bodies = (_body(i) for i in range(turns))
            series["api"] += (await http_chain(ctx, server, bodies))[1:]  # turn 1 is cold
            series["panel"] += (await _panel_loop(ctx, server, turns))[1:]
    finally:
        server.stop()
    ttft = {name: ttft_summary(results) for name, results in series.items()}
    whole = {name: summary([r.total for r in rs if r.error is None]) for name, rs in series.items()}
    section = Section(
        id="panel",
        title=f"The chat panel's turn vs the API's (TTFT and whole turn of turns 2-{turns})",
        baseline="API, previous_response_id, nothing read after",
        columns=["path", "TTFT", "whole turn", "over the API (whole turn, median)"],
    )
    labels = {"api": "API (previous_response_id)", "panel": "panel (conversation + 3 reads)"}
    for name, label in labels.items():
        over = _over(whole[name], whole["api"])
        cell = "-" if over is None else f"{over * 1000:+.1f} ms"
        section.rows.append([label, spread(ttft[name]), spread(whole[name]), cell])
    section.data = {"ttft": ttft, "whole": whole, "turns": turns}
    over = _over(whole["panel"], whole["api"])
    measured = "-" if over is None else f"{over * 1000:+.1f} ms"
    section.target(
        "panel turn <= API turn + 10 ms", measured, None if over is None else over <= TARGET_S
    )
    return section


def _over(top: dict[str, Any], bottom: dict[str, Any]) -> float | None:
    """Median minus median, in seconds."""
    if top.get("median") is None or bottom.get("median") is None:
        return None
    return float(top["median"] - bottom["median"])

"""Scenario 11, an agent loop: 10 turns over one WebSocket vs over HTTP, per-turn TTFT.

The same conversation (the same inputs and seeds, turns that end on their own so each
is continued warm) runs three ways, one after another in each repetition:

- **HTTP**: a streamed ``POST /v1/responses`` per turn, continuing the last stored
  response by ``previous_response_id`` (the baseline);
- **WebSocket, stored**: one connection, a ``response.create`` message per turn, the
  same ``previous_response_id`` chain;
- **WebSocket, store: false**: one connection, each turn continuing the connection's
  own unstored state.

TTFT is from sending the request (or message) to the first text delta. Targets:
WebSocket at most HTTP, and ``store: false`` turns warm (cached tokens reported).
"""

from __future__ import annotations

import json
import time
from typing import Any

import websockets

from bench.client import StreamResult
from bench.context import Context
from bench.model import MODEL_ID, eos_logit_bias
from bench.scenarios.common import Section, http_chain, ratio_of, spread, times, ttft_summary
from bench.servers import Server

TURNS = 10
OUTPUT_TOKENS = 48
FINAL = ("response.completed", "response.incomplete", "response.failed")


def _body(i: int, previous: str | None, store: bool) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": MODEL_ID,
        "input": f"Step {i}: call the next tool and report what it says.",
        "max_output_tokens": OUTPUT_TOKENS,
        "seed": i,
        "logit_bias": eos_logit_bias(2.0),  # turns end on their own: each is continued warm
        "store": store,
    }
    if previous:
        body["previous_response_id"] = previous
    return body


async def _ws_turn(ws: Any, body: dict[str, Any]) -> StreamResult:
    """One ``response.create`` over the connection, timed as a stream is."""
    result = StreamResult()
    started = time.monotonic()
    await ws.send(json.dumps({"type": "response.create", **body}))
    while True:
        event = json.loads(await ws.recv())
        kind = event.get("type")
        if kind == "response.output_text.delta" and event.get("delta") and result.ttft is None:
            result.first_delta = time.monotonic()
            result.ttft = result.first_delta - started
        if kind in FINAL:
            response = event["response"]
            usage = response.get("usage") or {}
            result.response_id, result.status = response.get("id"), response.get("status")
            result.output_tokens = usage.get("output_tokens")
            result.cached_tokens = (usage.get("input_tokens_details") or {}).get("cached_tokens")
            break
        if kind == "error":
            result.error = json.dumps(event)[:300]
            break
    result.total = time.monotonic() - started
    return result


async def _ws_loop(server: Server, turns: int, store: bool) -> list[StreamResult]:
    url = "ws" + server.url.removeprefix("http") + "/v1/responses"
    out: list[StreamResult] = []
    previous = None
    async with websockets.connect(url, additional_headers=server.headers) as ws:
        for i in range(turns):
            result = await _ws_turn(ws, _body(i, previous, store))
            out.append(result)
            previous = result.response_id
    return out


async def run(ctx: Context) -> Section:
    """Run the three loops ``reps`` times on one server and build the section."""
    turns = TURNS if ctx.cfg.name == "full" else 3
    server = await ctx.superfluid()
    series: dict[str, list[StreamResult]] = {"http": [], "ws": [], "ws-unstored": []}
    try:
        for _ in range(ctx.cfg.reps):
            bodies = (_body(i, None, True) for i in range(turns))
            series["http"] += (await http_chain(ctx, server, bodies))[1:]  # turn 1 is cold
            series["ws"] += (await _ws_loop(server, turns, True))[1:]
            series["ws-unstored"] += (await _ws_loop(server, turns, False))[1:]
    finally:
        server.stop()
    sums = {name: ttft_summary(results) for name, results in series.items()}
    section = Section(
        id="websocket",
        title=f"Agent loop: {turns} turns over one WebSocket vs HTTP (TTFT of turns 2-{turns})",
        baseline="HTTP, previous_response_id",
        columns=["transport", "TTFT per turn", "vs HTTP", "cached tokens (median)"],
    )
    names = {
        "http": "HTTP, stored",
        "ws": "WebSocket, stored",
        "ws-unstored": "WebSocket, store: false",
    }
    for name, label in names.items():
        cached = sorted(r.cached_tokens or 0 for r in series[name])
        median = cached[len(cached) // 2] if cached else 0
        ratio = ratio_of(sums[name], sums["http"])
        section.rows.append([label, spread(sums[name]), times(ratio), str(median)])
    section.data = {"ttft": sums, "turns": turns}
    ws_ratio = ratio_of(sums["ws"], sums["http"])
    section.target(
        "WebSocket TTFT <= HTTP", times(ws_ratio), None if ws_ratio is None else ws_ratio <= 1.0
    )
    warm = all((r.cached_tokens or 0) > 0 for r in series["ws-unstored"])
    section.target("store: false turns warm", "all" if warm else "not all", warm)
    return section

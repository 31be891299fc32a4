"""Scenario 12, the chat panel's path: a turn as the panel makes it vs the same turn by API.

The panel (``labextension/src/chat/model.ts``) sends each turn as a streamed
``POST /v1/responses`` with ``conversation`` (the server finds the head and moves it),
and shows the finished turn from the stream itself (``chat/storedTurn.ts``): it reads
nothing back. Until 2026-12-02 it read the conversation, its items and its response
tree after every answer; that path is the third row, side by side. The API path
continues the same history by ``previous_response_id``. All run the same inputs and
seeds, with the end token banned, so each turn generates the same number of tokens.

Per turn: TTFT, and the whole turn (from sending to the stream's end, or to the old
panel's reads answered). Target: the panel's turn costs at most 10 ms over the API's,
median against median.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from typing import Any

import httpx

from bench.client import StreamResult, stream_response
from bench.context import Context
from bench.model import MODEL_ID, eos_logit_bias
from bench.scenarios.common import Section, spread, ttft_summary
from bench.servers import Server
from bench.stats import summary

TURNS = 8
OUTPUT_TOKENS = 24
TARGET_S = 0.010
FULL_REPS = 10  # 70 pairs: the 10 ms target is well under a turn's spread (~150 ms)


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


class _Path:
    """One way of taking turns in one conversation: the API's, or the panel's."""

    def __init__(self, kind: str) -> None:
        self.kind = kind  # api | panel | reads
        self.previous: str | None = None
        self.conv: str | None = None

    async def turn(self, http: httpx.AsyncClient, server: Server, i: int) -> StreamResult:
        """One turn as this path takes it, timed from sending to the last thing it awaits."""
        body = _body(i)
        if self.kind == "api":
            body.update({"previous_response_id": self.previous} if self.previous else {})
        else:
            if self.conv is None:
                created = await http.post(
                    server.url + "/v1/conversations", json={}, headers=server.headers
                )
                self.conv = created.raise_for_status().json()["id"]
            body["conversation"] = self.conv
        started = time.monotonic()
        result = await stream_response(http, server.url + "/v1/responses", body, server.headers)
        if self.kind == "reads" and self.conv is not None:
            await _panel_reads(http, server, self.conv)
        result.total = time.monotonic() - started
        self.previous = result.response_id
        return result


async def _lockstep(ctx: Context, server: Server, turns: int) -> dict[str, list[StreamResult]]:
    """Three conversations advanced together, turn by turn, so each turn's paths share
    the machine's state; the first (cold) turn of each is left out."""
    paths = [_Path(kind) for kind in ("api", "panel", "reads")]
    out: dict[str, list[StreamResult]] = {p.kind: [] for p in paths}
    async with ctx.http() as http:
        for i in range(turns):
            for path in paths if i % 2 == 0 else reversed(paths):  # neither always first
                result = await path.turn(http, server, i)
                if i > 0:
                    out[path.kind].append(result)
    return out


async def run(ctx: Context) -> Section:
    """Run the three paths in lockstep, repeatedly, on one server; build the section."""
    turns = TURNS if ctx.cfg.name == "full" else 3
    server = await ctx.superfluid()
    series: dict[str, list[StreamResult]] = {"api": [], "panel": [], "reads": []}
    reps = FULL_REPS if ctx.cfg.name == "full" else ctx.cfg.reps
    try:
        for _ in range(reps):
            for kind, results in (await _lockstep(ctx, server, turns)).items():
                series[kind] += results
    finally:
        server.stop()
    ttft = {name: ttft_summary(results) for name, results in series.items()}
    whole = {name: summary([r.total for r in rs if r.error is None]) for name, rs in series.items()}
    over = {name: _paired(series[name], series["api"]) for name in series}
    section = Section(
        id="panel",
        title=f"The chat panel's turn vs the API's (TTFT and whole turn of turns 2-{turns})",
        baseline="API, previous_response_id, nothing read after",
        columns=["path", "TTFT", "whole turn", "over the API (whole turn, median of pairs)"],
    )
    labels = {
        "api": "API (previous_response_id)",
        "panel": "panel (conversation, the turn from the stream)",
        "reads": "panel before 2026-12-02 (conversation + 3 reads)",
    }
    for name, label in labels.items():
        value = over[name]
        cell = "-" if value is None else f"{value * 1000:+.1f} ms"
        section.rows.append([label, spread(ttft[name]), spread(whole[name]), cell])
    section.notes.append(
        "The three conversations advance in lockstep (turn i of each, in alternating order);"
        " the overhead is the median over turns of the panel's turn minus the API's same turn."
    )
    section.data = {"ttft": ttft, "whole": whole, "over_s": over, "turns": turns}
    panel = over["panel"]
    measured = "-" if panel is None else f"{panel * 1000:+.1f} ms"
    met = None if panel is None else panel <= TARGET_S
    section.target("panel turn <= API turn + 10 ms", measured, met)
    return section


def _paired(top: list[StreamResult], bottom: list[StreamResult]) -> float | None:
    """The median of the per-turn differences of whole turns, in seconds."""
    pairs = [
        a.total - b.total
        for a, b in zip(top, bottom, strict=True)
        if a.error is None and b.error is None
    ]
    return statistics.median(pairs) if pairs else None

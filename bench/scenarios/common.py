"""Helpers every scenario shares: summarising results and formatting table cells."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.client import StreamResult, stream_response
from bench.context import Context
from bench.conversation import Conversation
from bench.servers import Server
from bench.stats import ratio, summary
from bench.turns import sf_whole

SMALL_N = 10  # below this many samples the spread shown is min-max, else p10-p90


@dataclass
class Section:
    """One scenario's results: a table for the report and numbers for the JSON."""

    id: str
    title: str
    baseline: str
    columns: list[str]
    rows: list[list[str]] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    targets: list[dict[str, Any]] = field(default_factory=list)

    def target(self, name: str, measured: str, met: bool | None) -> None:
        """Record how this run stands against one of the issue's targets."""
        self.targets.append({"target": name, "measured": measured, "met": met})

    def to_json(self) -> dict[str, Any]:
        """The section as plain JSON values."""
        return {
            "id": self.id,
            "title": self.title,
            "baseline": self.baseline,
            "columns": self.columns,
            "rows": self.rows,
            "data": self.data,
            "notes": self.notes,
            "targets": self.targets,
        }


def ttft_summary(results: Iterable[StreamResult]) -> dict[str, Any]:
    """Summary of the TTFTs of the results that produced text, plus their error count."""
    results = list(results)
    values = [r.ttft for r in results if r.ttft is not None and r.error is None]
    out = summary(values)
    out["errors"] = sum(1 for r in results if r.error is not None or r.ttft is None)
    return out


def spread(s: dict[str, Any], scale: float = 1000.0, unit: str = "ms") -> str:
    """``median (low-high) unit``: min-max for few samples, else p10-p90."""
    if not s or s.get("median") is None:
        return "-"
    low, high = ("min", "max") if s["n"] < SMALL_N else ("p10", "p90")
    return f"{_num(s['median'] * scale)} ({_num(s[low] * scale)}-{_num(s[high] * scale)}) {unit}"


def _num(value: float) -> str:
    """A compact number: 3 significant digits, no exponent."""
    if value >= 100:
        return f"{value:.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def times(value: float | None) -> str:
    """A ratio cell: ``0.052x`` (or ``-``)."""
    if value is None:
        return "-"
    return f"{value:.3g}x"


def ratio_of(top: dict[str, Any] | None, bottom: dict[str, Any] | None) -> float | None:
    """Ratio of two summaries' medians."""
    return ratio(top, bottom)


def paired_overhead(top: list[StreamResult], bottom: list[StreamResult]) -> float | None:
    """1 + the median of the per-turn TTFT differences over the baseline's median TTFT.

    For turns measured in pairs (each of ``top`` right after or before its ``bottom``), so
    that load from elsewhere, which hits a pair alike, cancels out of the difference.
    """
    pairs = [
        (a.ttft, b.ttft)
        for a, b in zip(top, bottom, strict=True)
        if a.ttft is not None and b.ttft is not None and a.error is None and b.error is None
    ]
    if not pairs:
        return None
    base = statistics.median(b for _, b in pairs)
    return round(1 + statistics.median(a - b for a, b in pairs) / base, 4)


def median_of(values: Sequence[int | None]) -> int | None:
    """Median of the known values (for token counts)."""
    known = sorted(v for v in values if v is not None)
    return known[len(known) // 2] if known else None


async def cold_turn(
    ctx: Context, conv: Conversation, user: str, max_tokens: int, seed: int
) -> StreamResult:
    """A turn with the whole conversation, on a freshly started superfluid (a cold server)."""

    async def request(server: Server) -> StreamResult:
        async with ctx.http() as http:
            return await sf_whole(http, server, conv, user, max_tokens=max_tokens, seed=seed)

    return await ctx.on_fresh_superfluid(request)


async def http_chain(
    ctx: Context, server: Server, bodies: Iterable[dict[str, Any]]
) -> list[StreamResult]:
    """Streamed ``POST /v1/responses`` turns, each continuing the last by
    ``previous_response_id``: the conversation a client keeps by id over HTTP."""
    out: list[StreamResult] = []
    previous = None
    async with ctx.http() as http:
        for body in bodies:
            body = {**body, **({"previous_response_id": previous} if previous else {})}
            result = await stream_response(http, server.url + "/v1/responses", body, server.headers)
            out.append(result)
            previous = result.response_id
    return out

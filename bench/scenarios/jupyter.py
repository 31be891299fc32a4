"""Scenario 6, Jupyter stays responsive: ``GET /api/status`` latency while streams generate.

A real ``jupyter server`` runs the extension on the bench model (token auth).
``/api/status`` is requested one after another from this process's main
thread: first with the server idle, then while several ``/v1/responses``
streams generate, driven from another thread (its own event loop), so the
client's SSE parsing does not sit in front of the measured requests. Only
samples taken while every stream is still running count as "under load".
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import httpx

from bench.context import Context
from bench.conversation import Conversation
from bench.scenarios.common import Section, times
from bench.servers import Server, start_jupyter
from bench.stats import latency_summary
from bench.turns import sf_whole, warm_up

PAUSE_S = 0.005  # between status requests


def _sample(client: httpx.Client, server: Server) -> float:
    """One timed ``GET /api/status``."""
    started = time.perf_counter()
    r = client.get(server.url + "/api/status", headers=server.headers)
    elapsed = time.perf_counter() - started
    r.raise_for_status()
    return elapsed


class _Streams(threading.Thread):
    """Runs the generating streams on its own event loop; ``running`` while all are."""

    def __init__(self, ctx: Context, server: Server) -> None:
        super().__init__(daemon=True)
        self.ctx, self.server = ctx, server
        self.running = threading.Event()
        self.results: list[Any] = []
        self.error: str | None = None

    def run(self) -> None:
        """Start every stream; flag ``running`` until the first ends."""
        try:
            asyncio.run(self._all())
        except Exception as err:  # reported as stream errors
            self.error = f"{type(err).__name__}: {err}"
        finally:
            self.running.clear()

    async def _one(self, http: httpx.AsyncClient, i: int) -> Any:
        user = self.ctx.tokenizer.text(24, seed=60_000 + i)
        n = self.ctx.cfg.jupyter_stream_tokens
        r = await sf_whole(http, self.server, Conversation(f"j{i}"), user, max_tokens=n, seed=i)
        self.running.clear()  # the first stream to end ends "under load"
        return r

    async def _all(self) -> None:
        async with self.ctx.http() as http:
            tasks = [
                asyncio.create_task(self._one(http, i)) for i in range(self.ctx.cfg.jupyter_streams)
            ]
            await asyncio.sleep(0.2)  # all submitted and generating
            self.running.set()
            self.results = await asyncio.gather(*tasks)


def _measure(ctx: Context, server: Server) -> tuple[list[float], list[float], list[Any]]:
    """Idle samples, samples under load, and the streams' results."""
    with httpx.Client(timeout=30, trust_env=False) as client:
        for _ in range(10):
            _sample(client, server)  # warm the connection and the handler
        idle = []
        for _ in range(ctx.cfg.status_samples):
            idle.append(_sample(client, server))
            time.sleep(PAUSE_S)
        streams = _Streams(ctx, server)
        streams.start()
        streams.running.wait(timeout=60)
        loaded = []
        while streams.running.is_set() and streams.is_alive():
            value = _sample(client, server)
            if streams.running.is_set():
                loaded.append(value)
            time.sleep(PAUSE_S)
        streams.join()
    return idle, loaded, streams.results


async def run(ctx: Context) -> Section:
    """Measure idle and loaded latency; one table row."""
    ctx.log("jupyter: starting jupyter server")
    server = await asyncio.to_thread(start_jupyter, ctx.cfg, ctx.model, ctx.workdir)
    try:
        async with ctx.http() as http:
            await warm_up(http, server, "superfluid")
        idle, loaded, results = await asyncio.to_thread(_measure, ctx, server)
    finally:
        server.stop()
    ctx.log("jupyter: done")
    s_idle, s_load = latency_summary(idle), latency_summary(loaded)
    errors = sum(1 for r in results if not r.ok)
    p99 = s_load.get("p99")
    ratio_p99 = [times(_r(p99, s_idle.get("p99"))), "", ""]
    section = Section(
        id="jupyter",
        title=f"6. Jupyter: GET /api/status while {ctx.cfg.jupyter_streams} streams generate",
        baseline="the same requests with the server idle",
        columns=["", "samples", "p50", "p99", "max", "stream errors"],
        rows=[
            _row("idle (baseline)", s_idle, ""),
            _row(f"{ctx.cfg.jupyter_streams} streams generating", s_load, str(errors)),
            ["loaded / idle", "", times(_r(s_load.get("p50"), s_idle.get("p50"))), *ratio_p99],
        ],
        data={"idle": s_idle, "loaded": s_load, "stream_errors": errors},
    )
    met = None if p99 is None else p99 < 0.05
    section.target("p99 of /api/status under load < 50 ms", _ms(p99), met)
    return section


def _row(label: str, s: dict[str, Any], errors: str) -> list[str]:
    """One latency row."""
    return [label, str(s["n"]), _ms(s.get("p50")), _ms(s.get("p99")), _ms(s.get("max")), errors]


def _ms(seconds: float | None) -> str:
    """Seconds as a millisecond cell."""
    return "-" if seconds is None else f"{seconds * 1000:.1f} ms"


def _r(top: float | None, bottom: float | None) -> float | None:
    """top / bottom, or None."""
    return top / bottom if top is not None and bottom else None

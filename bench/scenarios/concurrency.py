"""Scenario 5, throughput under concurrency: aggregate tokens/s of 1, 2, 4, 8 streams at once.

Each stream is a chat completion (the same protocol on both servers) with a
short prompt of its own and a fixed number of output tokens (end-of-turn
banned). Aggregate rate: tokens received by streams that finished, over the
wall time from the first request to the last stream's end. Errors: streams
that failed or ended short.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from bench.client import StreamResult
from bench.context import Context
from bench.conversation import Conversation
from bench.scenarios.common import Section, times
from bench.servers import Server, cpu_seconds
from bench.stats import summary
from bench.turns import chat_whole

PROMPT_TOKENS = 24


async def _burst(ctx: Context, server: Server, n: int, rep: int) -> tuple[float, int, int, list]:
    """``n`` concurrent streams: (wall seconds, tokens, errors, results)."""
    users = [ctx.tokenizer.text(PROMPT_TOKENS, seed=50_000 + 100 * rep + i) for i in range(n)]
    k = ctx.cfg.concurrency_tokens
    async with ctx.http() as http:
        started = time.monotonic()
        results: list[StreamResult] = await asyncio.gather(
            *(
                chat_whole(http, server, Conversation(f"s{i}"), u, max_tokens=k, seed=i)
                for i, u in enumerate(users)
            )
        )
        wall = time.monotonic() - started
    good = [r for r in results if r.ok and r.status == "length"]
    return wall, sum(r.output_tokens or 0 for r in good), len(results) - len(good), results


def _entry(rates: list[float], errors: int, ttfts: list[float], cached: int) -> dict[str, Any]:
    """Aggregate tok/s summary, errors, TTFT summary, prompt tokens served from cache."""
    return {"rate": summary(rates), "errors": errors, "ttft": summary(ttfts), "cached": cached}


# superfluid, superfluid sending each step's tokens at once, llama-server -np N, llama_cpp.server
KEYS = ("sf", "sf0", "ls", "lc")
EACH_STEP = "--engine-stream-interval=0"


async def _measure(ctx: Context, servers: dict[str, Server | None]) -> dict[str, dict[int, Any]]:
    """Per server and stream count: aggregate rates, errors, TTFTs.

    Each superfluid burst is followed by the same burst on the others, so a burst
    of load from elsewhere hits them alike. Each entry also has the CPU seconds of the
    server's own process (superfluid's: its HTTP server, not its engine process) and
    the tokens it streamed.
    """
    out: dict[str, dict[int, Any]] = {key: {} for key in KEYS}
    for n in ctx.cfg.concurrency:
        acc: dict[str, tuple[list[float], list[int], list[float], list[int]]] = {
            key: ([], [], [], []) for key in KEYS
        }
        cpu = dict.fromkeys(KEYS, 0.0)
        streamed = dict.fromkeys(KEYS, 0)
        for rep in range(ctx.cfg.rate_reps):
            for key in KEYS:
                server = servers.get(key)
                if server is None:
                    continue
                before = cpu_seconds(server.pid)
                wall, tokens, errs, results = await _burst(ctx, server, n, rep)
                cpu[key] += cpu_seconds(server.pid) - before
                streamed[key] += tokens
                acc[key][0].append(tokens / wall)
                acc[key][1].append(errs)
                acc[key][2].extend(r.ttft for r in results if r.ttft is not None)
                acc[key][3].extend(r.cached_tokens or 0 for r in results)
        for key in KEYS:
            if servers.get(key) is not None:
                rates, errors, ttfts, cached = acc[key]
                out[key][n] = _entry(rates, sum(errors), ttfts, sum(cached))
                out[key][n] |= {"process_cpu_s": cpu[key], "tokens": streamed[key]}
    return out


def _ratio(a: dict[str, Any], b: dict[str, Any] | None) -> float | None:
    return a["rate"]["median"] / b["rate"]["median"] if b and b["rate"]["median"] else None


def _cell(entry: dict[str, Any] | None) -> str:
    """``median (low-high) tok/s``."""
    if not entry or entry["rate"]["median"] is None:
        return "-"
    s = entry["rate"]
    return f"{s['median']:.0f} ({s['min']:.0f}-{s['max']:.0f}) tok/s"


def _errors(entry: dict[str, Any] | None) -> str:
    """The error count, or a dash."""
    return "-" if entry is None else str(entry["errors"])


def _ms(entry: dict[str, Any] | None) -> str:
    """The median TTFT in ms."""
    if not entry or entry["ttft"]["median"] is None:
        return "-"
    return f"{entry['ttft']['median'] * 1000:.0f} ms"


def _cached(entry: dict[str, Any] | None) -> str:
    """The cached prompt tokens, or a dash."""
    return "-" if entry is None else str(entry["cached"])


async def _started_and_measured(ctx: Context, threads: int | None) -> dict[str, dict[int, Any]]:
    """Start superfluid and llama-server (``threads``: instead of the configured ones), measure.

    ``llama_cpp.server`` is shared by the run, so only the configured threads compare it,
    and superfluid with each step's tokens sent at once.
    """
    slots = max(ctx.cfg.concurrency)
    servers = {
        "lc": await ctx.llama_cpp_server() if threads is None else None,
        "ls": await ctx.llama_server(slots, threads),
    }
    servers["sf"] = await ctx.superfluid(extra=() if threads is None else (f"--threads={threads}",))
    servers["sf0"] = await ctx.superfluid(extra=(EACH_STEP,)) if threads is None else None
    try:
        return await _measure(ctx, servers)
    finally:
        for key in ("sf", "sf0", "ls"):
            server = servers[key]
            if server is not None:
                server.stop()


async def run(ctx: Context) -> Section:
    """Measure every server; one table row per stream count (and per thread count)."""
    got = await _started_and_measured(ctx, None)
    spare = None
    if ctx.cfg.threads > 1 and ctx.llama_server_binary is not None:
        ctx.log("concurrency: again with one compute thread each")
        spare = await _started_and_measured(ctx, 1)
    ctx.log("concurrency: done")
    slots = max(ctx.cfg.concurrency)
    section = Section(
        id="concurrency",
        title=f"5. Throughput: concurrent {ctx.cfg.concurrency_tokens}-token streams",
        baseline=f"llama-server -np {slots} and llama_cpp.server, the same streams",
        columns=[
            "streams",
            "superfluid",
            "errors",
            "median TTFT",
            f"llama-server -np {slots}",
            "errors",
            "median TTFT",
            "superfluid / llama-server",
            "llama_cpp.server",
            "superfluid / llama_cpp.server",
        ],
    )
    _rows(ctx, section, got, "")
    _each_step_rows(ctx, section, got)
    if spare is not None:
        section.data["one_thread"] = {}
        _rows(ctx, section, spare, ", 1 thread")
        section.notes.append(_one_thread_note(ctx, got, spare))
    section.notes.append(
        f"{ctx.cfg.rate_reps} repetitions per point, each superfluid burst followed by the "
        "same burst on the others; a rate is the median over them."
    )
    section.notes.append(
        "Prompt tokens served from cache, all repetitions (superfluid / llama-server): "
        + "; ".join(
            f"{n} streams {_cached(got['sf'].get(n))} / {_cached(got['ls'].get(n))}"
            for n in ctx.cfg.concurrency
        )
        + ". The prompts of a repetition recur at the next stream counts, so TTFT also "
        "shows which prompts each server still holds."
    )
    section.notes.append(
        "llama_cpp.server runs with --interrupt_requests False; with its default (True) a new "
        "request cuts off the stream in progress."
    )
    return section


def _rows(ctx: Context, section: Section, got: dict[str, dict[int, Any]], label: str) -> None:
    """One row per stream count; the configured threads' rows carry the targets."""
    data = section.data["one_thread"] if label else section.data
    for n in ctx.cfg.concurrency:
        a, b, c = got["sf"][n], got["ls"].get(n), got["lc"].get(n)
        native, lc = _ratio(a, b), _ratio(a, c)
        ours = [f"{n}{label}", _cell(a), str(a["errors"]), _ms(a)]
        native_cells = [_cell(b), _errors(b), _ms(b), times(native)]
        section.rows.append([*ours, *native_cells, _cell(c), times(lc)])
        data[str(n)] = {
            "superfluid": a,
            "llama_server": b,
            "llama_cpp": c,
            "llama_server_ratio": native,
            "ratio": lc,
        }
        if not label:
            met = None if native is None else native >= 1.0
            section.target(f">= 1.0 x llama-server's throughput, {n} streams", times(native), met)


def _each_step_rows(ctx: Context, section: Section, got: dict[str, dict[int, Any]]) -> None:
    """superfluid with each step's tokens sent at once: rows, the server's CPU, no targets."""
    section.data["each_step"] = {}
    for n in ctx.cfg.concurrency:
        a, b = got["sf0"][n], got["ls"].get(n)
        ours = [f"{n}, each step at once", _cell(a), str(a["errors"]), _ms(a)]
        section.rows.append([*ours, _cell(b), _errors(b), _ms(b), times(_ratio(a, b)), "-", "-"])
        section.data["each_step"][str(n)] = {"superfluid": a, "llama_server_ratio": _ratio(a, b)}
    section.notes.append(
        "superfluid's engine process holds a stream's tokens up to 8 ms and sends them"
        " together (`engine_stream_interval`; a prompt's first token and a stream's end go"
        " at once, and a client still gets an event per token); the rows marked each step at"
        f" once run with `{EACH_STEP}`. Its HTTP server's CPU per streamed token:"
        f" {_cpu_per_token(got['sf'])} ms held, {_cpu_per_token(got['sf0'])} ms each step"
        " at once."
    )


def _cpu_per_token(entries: dict[int, Any]) -> str:
    """A superfluid server process's CPU per streamed token over all stream counts, in ms."""
    seconds = sum(e["process_cpu_s"] for e in entries.values())
    tokens = sum(e["tokens"] for e in entries.values())
    return f"{1000 * seconds / tokens:.2f}" if tokens else "-"


def _one_thread_note(
    ctx: Context, got: dict[str, dict[int, Any]], spare: dict[str, dict[int, Any]]
) -> str:
    """What the rows with one compute thread each show."""
    ratios = ", ".join(
        f"{n} streams {times(_ratio(spare['sf'][n], spare['ls'].get(n)))}"
        for n in ctx.cfg.concurrency
    )
    return (
        f"superfluid's HTTP server, a Python process, spent {_cpu_per_token(got['sf'])} ms of"
        " CPU per streamed"
        " token (engine frames in, SSE out), on the cores that llama.cpp's"
        f" {ctx.cfg.threads} compute threads keep busy; llama-server's HTTP thread is C++. With"
        " one compute thread each, a core left for the HTTP layers (the rows marked 1 thread):"
        f" superfluid / llama-server {ratios}."
    )

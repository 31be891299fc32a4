"""Scenario 9, a sustained mixed load: throughput and memory over time, with and without parking.

``soak_clients`` clients send the mix of ``bench/soak_load.py`` in repeated cycles (stored
conversations continued, new ones started, one-off chat completions under
shared instructions, ``store: false`` Responses, LMSP without ``store``) for
``soak_seconds`` against superfluid with its defaults (parking in host memory
and the disk tier), then for ``soak_baseline_seconds`` against one with
``--cache-ram 0 --cache-disk 0`` (no parking, nothing on disk). Reported per
window: finished requests per second and the servers' CPU milliseconds per
request (engine process included; less sensitive to other load than the
rate), and the resident memory of server and engine over the run. Both servers
run llama.cpp on one thread (the comparison is of cache policies).
"""

from __future__ import annotations

from typing import Any

from bench.context import Context
from bench.scenarios.common import Section, times
from bench.soak_load import SoakConfig, SoakResult, soak

NO_PARKING = ("--cache-ram=0", "--cache-disk=0")
# One llama.cpp thread: on a small machine the load's own processes take the other
# cores, and llama.cpp's threads spin-waiting for each other made the CPU time per
# request swing fivefold (2 threads on 2 shared cores). This compares cache policies.
ONE_THREAD = ("--threads=1",)


async def _run(ctx: Context, seconds: float, extra: tuple[str, ...]) -> SoakResult:
    cfg = ctx.cfg
    server = await ctx.superfluid(extra=ONE_THREAD + extra)
    try:
        load = SoakConfig(clients=cfg.soak_clients, seconds=seconds, windows=cfg.soak_windows)
        return await soak(server, ctx.tokenizer, load)
    finally:
        server.stop()


def _rates(result: SoakResult, seconds: float, windows: int) -> list[float]:
    return [round(r, 1) for r in result.rates(seconds / windows)]


def _mib(result: SoakResult) -> tuple[float, float, float]:
    """RSS at the start, the peak and the end, in MiB."""
    values = [b / 2**20 for _, b in result.rss] or [0.0]
    return values[0], max(values), values[-1]


def _row(name: str, result: SoakResult, seconds: float, windows: int) -> list[str]:
    rates = _rates(result, seconds, windows)
    cpu = [v for v in result.cpu_ms_per_request() if v is not None]
    start, peak, end = _mib(result)
    cached = result.cached_tokens / result.input_tokens if result.input_tokens else 0.0
    return [
        name,
        f"{seconds:.0f} s",
        " → ".join(f"{r:g}" for r in rates),
        f"{sum(result.done) / seconds:.1f}",
        " → ".join(f"{c:.1f}" for c in cpu) if cpu else "-",
        " → ".join(f"{t:.0f}" for t in result.prompt_tokens_per_request() if t is not None),
        f"{start:.0f} → {peak:.0f} → {end:.0f} MiB",
        f"{cached:.2f}",
        str(sum(result.errors.values())),
    ]


async def run(ctx: Context) -> Section:
    """The defaults, then no parking; one row each."""
    cfg = ctx.cfg
    ctx.log(f"soak: {cfg.soak_seconds:.0f} s with parking")
    parked = await _run(ctx, cfg.soak_seconds, ())
    ctx.log(f"soak: {cfg.soak_baseline_seconds:.0f} s without parking")
    plain = await _run(ctx, cfg.soak_baseline_seconds, NO_PARKING)
    section = Section(
        id="soak",
        title=f"9. Sustained mixed load: {cfg.soak_clients} clients, throughput over time",
        baseline="the same load with --cache-ram 0 --cache-disk 0 (no parking, no disk tier)",
        columns=[
            "superfluid",
            "run",
            "requests/s per window",
            "requests/s",
            "CPU ms per request, per window",
            "input tokens per request, per window",
            "RSS start → peak → end",
            "cached / input tokens",
            "errors",
        ],
    )
    windows = cfg.soak_windows
    section.rows.append(_row("defaults (parking, disk)", parked, cfg.soak_seconds, windows))
    section.rows.append(_row(" ".join(NO_PARKING), plain, cfg.soak_baseline_seconds, windows))
    section.data = {"parking": parked.to_json(), "no_parking": plain.to_json()}
    _judge(section, parked, plain, cfg.soak_seconds, cfg.soak_baseline_seconds)
    section.notes.append(_engine_note(parked))
    section.notes.append(
        "Mix: 35% continue a stored conversation, 15% start one, 25% one-off chat "
        "completions under shared instructions, 15% Responses with store false, 10% LMSP "
        "without store; each client repeats its own seeded cycle of 20 such requests, so "
        "every window asks the same work. RSS: the server and its engine process together."
    )
    return section


def _engine_note(result: SoakResult) -> str:
    """The engine's work per window of the run with parking."""
    per = result.engine
    lines = "; ".join(
        f"{name.replace('_', ' ')} {' → '.join(str(w[name]) for w in per)}"
        for name in (per[0] if per else {})
    )
    steal = " → ".join(f"{s:.1f}" for s in result.stolen_per_window()) or "-"
    return (
        f"The engine per window, with parking (its counters' growth): {lines}. CPU seconds"
        f" the host took from this virtual machine per window (steal): {steal}."
    )


def _judge(
    section: Section, parked: SoakResult, plain: SoakResult, seconds: float, base_seconds: float
) -> None:
    """Parking costs no throughput; it does not fall as states pile up; memory stays bounded."""
    ours, theirs = sum(parked.done) / seconds, sum(plain.done) / base_seconds
    ratio = ours / theirs if theirs else None
    section.data["parking_over_no_parking"] = ratio
    section.target(
        "parking never lowers throughput (requests/s with / without)",
        times(ratio),
        None if ratio is None else ratio >= 1.0,
    )
    first, last = parked.done[0], parked.done[-1]
    flat = last / first if first else None
    section.data["last_over_first_window"] = flat
    section.target(
        "throughput flat over the run (last window / first >= 0.95)",
        times(flat),
        None if flat is None else flat >= 0.95,
    )
    stats: dict[str, Any] = parked.stats
    section.data["ram_bytes_at_end"] = stats.get("ram_bytes")

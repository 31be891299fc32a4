"""Run the scenarios in one process, side by side with the baselines, and write the report."""

from __future__ import annotations

import asyncio
import datetime as dt
import importlib
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import memory, report
from bench.config import CACHE_DIR, RESULTS_DIR, BenchConfig
from bench.context import Context
from bench.conversation import Tokenizer
from bench.model import model_path
from bench.servers import llama_cpp_server_available


@dataclass
class RunOptions:
    """How to run: which scenarios, what to compare against, where to write."""

    cfg: BenchConfig
    scenarios: tuple[str, ...]
    command: str
    out_dir: Path = RESULTS_DIR
    stem: str | None = None  # output file name without suffix; default: today's date
    llama_cpp_server: bool = True
    llama_server_binary: Path | None = None
    keep_workdir: bool = False
    scratch: Path | None = None  # where servers keep stores and logs; default under .cache


async def _scenarios(ctx: Context, names: tuple[str, ...]) -> list[dict[str, Any]]:
    """Run each scenario module's ``run(ctx)`` in order."""
    sections = []
    try:
        for name in names:
            ctx.log(f"scenario {name}")
            module = importlib.import_module(f"bench.scenarios.{name}")
            started, load = time.monotonic(), os.getloadavg()[0]
            with memory.Sampler() as sampler:
                section = await module.run(ctx)
            section.data["peak_rss_mib"] = sampler.peaks.to_json()
            if sampler.peaks.bytes:
                section.notes.append(sampler.peaks.line())
            section.data["_run"] = {
                "seconds": round(time.monotonic() - started, 1),
                "load1_at_start": round(load, 2),
                "load1_at_end": round(os.getloadavg()[0], 2),
            }
            sections.append(section.to_json())
    finally:
        ctx.close()
    return sections


def run(options: RunOptions) -> tuple[Path, Path]:
    """Run the benchmarks and write the JSON and Markdown; return their paths."""
    started = time.monotonic()
    cfg = options.cfg
    with_llama_cpp = options.llama_cpp_server and llama_cpp_server_available()
    skipped = []
    if options.llama_cpp_server and not with_llama_cpp:
        skipped.append("llama_cpp.server (install the [bench] extra to compare with it)")
    if options.llama_server_binary is None:
        skipped.append("C++ llama-server (pass --with-llama-server to build and compare)")
    model = model_path(cfg.shape, CACHE_DIR)
    workdir = Path(tempfile.mkdtemp(prefix="bench-", dir=options.scratch or _scratch()))
    before = report.load_snapshot()
    ctx = Context(
        cfg, model, workdir, Tokenizer(model), with_llama_cpp, options.llama_server_binary
    )
    try:
        sections = asyncio.run(_scenarios(ctx, options.scenarios))
    finally:
        if not options.keep_workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    results = {
        "date": dt.date.today().isoformat(),
        "command": options.command,
        "duration_s": round(time.monotonic() - started, 1),
        "machine": report.machine(),
        "load": {"before": before, "after": report.load_snapshot()},
        "config": cfg.to_json(),
        "model": {
            "shape": cfg.shape.describe(),
            "file": model.name,
            "mib": round(model.stat().st_size / 2**20, 1),
        },
        "facts": ctx.facts,
        "sections": sections,
        "skipped": skipped,
    }
    return report.write(results, options.out_dir, options.stem or str(results["date"]))


def _scratch() -> Path:
    """Where servers keep their stores and logs during a run."""
    path = CACHE_DIR / "runs"
    path.mkdir(parents=True, exist_ok=True)
    return path

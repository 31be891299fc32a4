"""The run's report: ``results/<date>.json`` (small, commit-worthy) and ``<date>.md``."""

from __future__ import annotations

import json
import os
import platform
import subprocess
from pathlib import Path
from typing import Any


def machine() -> dict[str, Any]:
    """CPU, cores, memory and versions of the machine the run is on."""
    cpu = ""
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    mem_kb = 0
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            mem_kb = int(line.split()[1])
    import llama_cpp

    from jupyter_superfluid import __version__

    return {
        "cpu": cpu,
        "cores": len(os.sched_getaffinity(0)),
        "memory_gib": round(mem_kb / 2**20, 1),
        "python": platform.python_version(),
        "llama_cpp_python": llama_cpp.__version__,
        "jupyter_superfluid": __version__,
        "commit": _git_commit(),
    }


def _git_commit() -> str | None:
    """The repository's HEAD (plus ``-dirty`` with local changes), when in a checkout."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain"], capture_output=True, text=True)
        return head + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.CalledProcessError):
        return None


def load_snapshot() -> dict[str, Any]:
    """Load average and the busiest other processes now (to judge the noise)."""
    out = subprocess.run(
        ["ps", "-eo", "pcpu,comm", "--sort=-pcpu", "--no-headers"], capture_output=True, text=True
    ).stdout.splitlines()
    busy = [" ".join(line.split()) for line in out[:6] if line.strip()]
    return {"loadavg": [round(x, 2) for x in os.getloadavg()], "top_processes": busy}


def write(results: dict[str, Any], out_dir: Path, stem: str) -> tuple[Path, Path]:
    """Write ``stem.json`` and ``stem.md`` into ``out_dir``; return both paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path, md_path = out_dir / f"{stem}.json", out_dir / f"{stem}.md"
    tmp = json_path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(results, indent=1, sort_keys=False) + "\n")
    os.replace(tmp, json_path)
    md_path.write_text(markdown(results))
    return json_path, md_path


def _table(columns: list[str], rows: list[list[str]]) -> list[str]:
    """A Markdown table."""
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def _targets(sections: list[dict[str, Any]]) -> list[str]:
    """The summary table: each target of the issue, what this run measured, met or not."""
    rows = []
    for section in sections:
        for t in section.get("targets", []):
            met = {True: "met", False: "**missed**", None: "not measured"}[t["met"]]
            rows.append([t["target"], t["measured"], met])
    return _table(["target", "this run", ""], rows) if rows else []


def _kv(results: dict[str, Any]) -> str:
    """How superfluid's KV cells were laid out (cells as its logs said, or the setting)."""
    cfg = results["config"]
    cells = results.get("facts", {}).get("superfluid_kv_cells_default") or cfg["kv_tokens"]
    if cfg["kv_tokens"]:
        return f"{cfg['cache_slots']} cache slots sharing {cells} KV cells (one unified cache)"
    return (
        f"{cfg['cache_slots']} cache slots, each a KV stream of one window "
        f"({cells or 'slots x window'} cells in all, as llama-server -np)"
    )


def markdown(results: dict[str, Any]) -> str:
    """The report as Markdown: run facts, targets, then one table per scenario."""
    m, cfg = results["machine"], results["config"]
    load = results["load"]
    lines = [
        f"# Benchmarks {results['date']}",
        "",
        f"Command: `{results['command']}` ({results['duration_s']:.0f} s).",
        "",
        f"Machine: {m['cpu']}, {m['cores']} cores, {m['memory_gib']} GiB; Python "
        f"{m['python']}, llama-cpp-python {m['llama_cpp_python']}, jupyter_superfluid "
        f"{m['jupyter_superfluid']} ({m['commit']}). Load average before / after: "
        f"{load['before']['loadavg']} / {load['after']['loadavg']}.",
        "",
        f"Model: {results['model']['shape']} ({results['model']['mib']} MiB). Every server: "
        f"context {cfg['ctx_size']} per conversation, {cfg['threads']} threads, batch "
        f"{cfg['n_batch']}; superfluid: {_kv(results)}. "
        "Spread: min-max under 10 samples, else p10-p90.",
        "",
        *_targets(results["sections"]),
    ]
    for section in results["sections"]:
        lines += ["", f"## {section['title']}", "", f"Baseline: {section['baseline']}.", ""]
        lines += _table(section["columns"], section["rows"])
        run = section["data"].get("_run")
        if run:
            lines += [
                "",
                f"({run['seconds']:.0f} s; 1-minute load average {run['load1_at_start']} at the "
                f"start, {run['load1_at_end']} at the end.)",
            ]
        lines += [""] + [f"- {note}" for note in section["notes"]] if section["notes"] else []
    for skipped in results.get("skipped", []):
        lines += ["", f"Not run: {skipped}"]
    return "\n".join(lines).rstrip() + "\n"

"""Resident memory under a sustained mixed load stays under ``--cache-ram`` plus a fixed overhead.

Clients continue long stored conversations (their idle KV state is parked, many
times over what the bound holds) while one-off chat completions run beside
them. The engine process's resident memory is sampled throughout: its growth
over the warmed-up start is a bound, not a timing.
"""

from __future__ import annotations

import threading
from pathlib import Path

import httpx
from support.engine_processes import engine_children
from support.no_eos import EOS_ID

CHATML = "superfluid/tiny-chatml"
CACHE_RAM_MIB = 8
# The KV cells first touched (16384 x 512 B), the prefix counter and indexes, the
# allocator's slack, the writes waiting for the disk.
OVERHEAD_MIB = 32
ENDS_SOON = {str(EOS_ID): 3.0}
CLIENTS = 4
TURNS = 30


def rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for {pid}")


def converse(url: str, n: int, errors: list[str]) -> None:
    """Stored conversations of a few turns each (then left idle), with one-offs between."""
    previous: str | None = None
    with httpx.Client(base_url=url, timeout=120) as http:
        for turn in range(TURNS):
            words = " ".join(f"{n}.{turn}.{i}" for i in range(24 if previous else 120))
            if turn % 3 == 2:
                body = {"model": CHATML, "messages": [{"role": "user", "content": words}]}
                r = http.post("/v1/chat/completions", json={**body, "max_tokens": 8})
            else:
                body = {"model": CHATML, "input": words, "max_output_tokens": 24}
                body |= {"seed": turn, "logit_bias": ENDS_SOON}
                if previous:
                    body["previous_response_id"] = previous
                r = http.post("/v1/responses", json=body)
                out = r.json()
                if out.get("status") == "completed":
                    previous = None if turn % 8 == 7 else out["id"]
            if r.status_code != 200:
                errors.append(r.text[:200])


def test_resident_memory_stays_under_the_bound(sf_start_standalone) -> None:  # type: ignore[no-untyped-def]
    server = sf_start_standalone(
        f"--cache-ram={CACHE_RAM_MIB}",
        "--cache-slots=4",
        "--kv-tokens=16384",
        "--cache-disk=64",
        models=(CHATML,),
        context_size=4096,
    )
    errors: list[str] = []
    converse(server.url, 99, errors)  # warm up: every code path has run once
    (engine,) = engine_children(server.process.pid)
    start = rss(engine)
    peak = [start]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.05):
            peak[0] = max(peak[0], rss(engine))

    sampler = threading.Thread(target=sample)
    sampler.start()
    clients = [
        threading.Thread(target=converse, args=(server.url, n, errors)) for n in range(CLIENTS)
    ]
    for c in clients:
        c.start()
    for c in clients:
        c.join()
    done.set()
    sampler.join()
    stats = httpx.get(f"{server.url}/v1/models/{CHATML}", timeout=30).json()["superfluid"]
    assert errors == []
    bound = (CACHE_RAM_MIB + OVERHEAD_MIB) << 20
    assert stats["ram_bytes"] <= CACHE_RAM_MIB << 20, stats
    assert stats["ram_evicted"] > 0, stats  # the bound was reached: states were dropped for room
    assert peak[0] - start <= bound, f"{start >> 20} MiB grew to {peak[0] >> 20} MiB: {stats}"

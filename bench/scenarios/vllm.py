"""Scenario 13, a remote vLLM: superfluid over it vs that vLLM alone, interleaved.

One vLLM (CPU, the vLLM tests' 3M-parameter random Llama with tiny-qwen3's vocabulary
and template, ``tests/support/vllm_remote.py``) serves both sides. Superfluid serves it
as ``--model bench=vllm:URL#tokenizer=PATH``: conversations get a history through
superfluid, then are continued round-robin by ``previous_response_id``, so each prompt
goes to vLLM as the exact token ids it last served (``cached_tokens`` is vLLM's own
count, in whole 32-token blocks). vLLM alone is given the same user turns, each
conversation resent whole through its own ``/v1/chat/completions``, with a
``cache_salt`` of its own so the two sides never share cache hits. Each superfluid turn
is followed by the same turn on vLLM alone, so a burst of load hits both alike.

vLLM on CPU binds its compute thread to a core and leaves the others to everything
else (its documented layout: ``VLLM_CPU_OMP_THREADS_BIND``). Other processes that land
on that core preempt its forward passes: superfluid and the bench's client on it made a
turn 25 or 60 ms by chance, alike on both sides (medians of vLLM alone 26-65 ms run to
run). Here vLLM's compute gets the first core, and the bench's client and superfluid
(started from it) the rest, as such a deployment would place them.

Needs the vLLM venv (``jupyter superfluid build-vllm``); without it the scenario says so.
"""

from __future__ import annotations

import contextlib
import os
import random
from collections.abc import Iterator
from typing import Any

import httpx

from bench import memory, servers
from bench.client import StreamResult, stream_chat, stream_response
from bench.context import Context
from bench.model import MODEL_ID
from bench.scenarios.common import Section, median_of, ratio_of, spread, times, ttft_summary
from bench.servers import Server
from jupyter_superfluid.engine.remote.vllm_build import vllm_built, vllm_python
from tests.support.vllm_remote import BLOCK, SERVED, VllmServer, ensure_vllm_model

COUNT = 4
# Rounds of continued turns: a vLLM turn here is ~20 ms with a spread of as much again,
# so 8 pairs (the interleaved scenario's 2 rounds) left the median to chance, and so did
# 24 (medians of vLLM alone 26-65 ms run to run).
ROUNDS = 10
# Unmeasured continued rounds first: vLLM's first turns after its start are slower (its
# CPU kernels warm up), and they fell on the measured rounds' first pairs.
WARM_ROUNDS = 1
HISTORY_WORDS = 250  # about 1.2k tokens of the byte-level vocabulary
OUTPUT_TOKENS = 16
TTFT_OVERHEAD_TARGET = 1.10
WORDS = [
    "the",
    "cell",
    "frame",
    "plot",
    "data",
    "model",
    "value",
    "error",
    "kernel",
    "result",
    "table",
    "column",
]


def _text(words: int, seed: int) -> str:
    """Seeded plain words (the same on both sides)."""
    rng = random.Random(seed)
    return " ".join(rng.choice(WORDS) for _ in range(words))


def _sampling(seed: int) -> dict[str, Any]:
    return {"temperature": 0.8, "seed": seed, "top_p": 1.0}


async def _sf_turn(
    http: httpx.AsyncClient, sf: Server, conv: dict[str, Any], user: str, seed: int
) -> StreamResult:
    """A turn on superfluid, continuing ``conv`` by id when it has one."""
    body = {
        "model": MODEL_ID,
        "input": user,
        "max_output_tokens": OUTPUT_TOKENS,
        "reasoning": {"effort": "none"},
        **_sampling(seed),
        **({"previous_response_id": conv["id"]} if conv.get("id") else {}),
    }
    result = await stream_response(http, sf.url + "/v1/responses", body)
    result.extra["previous_tokens"] = conv.get("tokens", 0)
    if result.response_id:
        conv["id"] = result.response_id
        conv["tokens"] = (result.input_tokens or 0) + (result.output_tokens or 0)
    return result


async def _alone_turn(
    http: httpx.AsyncClient, vllm: VllmServer, messages: list[dict[str, str]], user: str, seed: int
) -> StreamResult:
    """The same turn on vLLM alone: the conversation resent whole; its reply joins it."""
    messages.append({"role": "user", "content": user})
    body = {
        "model": SERVED,
        "messages": messages,
        "max_tokens": OUTPUT_TOKENS,
        "cache_salt": "vllm-alone",
        "chat_template_kwargs": {"enable_thinking": False},
        **_sampling(seed),
    }
    result = await stream_chat(http, vllm.url + "/v1/chat/completions", body)
    messages.append({"role": "assistant", "content": result.text})
    return result


def _layout() -> tuple[dict[str, str], list[int] | None]:
    """vLLM's compute core (as its environment names it), and the cores for the rest;
    nothing is laid out on a single core."""
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        return {}, None
    return {"VLLM_CPU_OMP_THREADS_BIND": str(cores[0])}, cores[1:]


@contextlib.contextmanager
def _on(cores: list[int] | None) -> Iterator[None]:
    """This process, and what it starts meanwhile, on ``cores`` (None: where it was)."""
    before = os.sched_getaffinity(0)
    if cores is not None:
        os.sched_setaffinity(0, cores)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


async def _measure(
    ctx: Context, count: int, words: int, rounds: int
) -> dict[str, list[StreamResult]]:
    """Build ``count`` conversations on each side, then continue them round-robin."""
    python = vllm_python()
    bind, rest = _layout()
    model = ensure_vllm_model(python)
    vllm = VllmServer(python, model, servers.free_port(), ctx.workdir / "vllm.log", env=bind)
    vllm.start()  # before this process moves: vLLM lays out its own threads
    assert vllm.process is not None
    memory.watch("vllm", vllm.process)
    try:
        with _on(rest):
            spec = f"vllm:{vllm.url}#tokenizer={vllm.model}"
            sf = servers.start_superfluid_remote(spec, ctx.workdir, name="vllm")
            try:
                return await _rounds(ctx, sf, vllm, count, words, rounds)
            finally:
                sf.stop()
    finally:
        vllm.stop()


async def _rounds(
    ctx: Context, sf: Server, vllm: VllmServer, count: int, words: int, rounds: int
) -> dict[str, list[StreamResult]]:
    """The histories (not measured), then the rounds of continued turns, alternating."""
    out: dict[str, list[StreamResult]] = {"superfluid": [], "alone": []}
    async with ctx.http() as http:
        ours: list[dict[str, Any]] = [{} for _ in range(count)]
        theirs: list[list[dict[str, str]]] = [[] for _ in range(count)]
        for i in range(count):
            history = _text(words, 3000 + i)
            await _sf_turn(http, sf, ours[i], history, i)
            await _alone_turn(http, vllm, theirs[i], history, i)
        ctx.log(f"vllm: {count} conversations built")
        for rnd in range(1, WARM_ROUNDS + rounds + 1):
            for i in range(count):
                user, seed = _text(12, 30_000 + 100 * i + rnd), 100 * rnd + i
                ours_turn = await _sf_turn(http, sf, ours[i], user, seed)
                their_turn = await _alone_turn(http, vllm, theirs[i], user, seed)
                if rnd > WARM_ROUNDS:
                    out["superfluid"].append(ours_turn)
                    out["alone"].append(their_turn)
    ctx.log(f"vllm: {count} conversations measured")
    return out


def _warm_fraction(results: list[StreamResult]) -> float | None:
    """The smallest share of each continued turn's whole blocks that vLLM reported reused."""
    shares = [
        r.cached_tokens / (r.extra["previous_tokens"] // BLOCK * BLOCK)
        for r in results
        if r.cached_tokens is not None and r.extra.get("previous_tokens", 0) >= BLOCK
    ]
    return round(min(shares), 3) if shares else None


async def run(ctx: Context) -> Section:
    """One row: TTFT through superfluid and alone, and vLLM's cached tokens."""
    section = Section(
        id="vllm",
        title="13. A remote vLLM: superfluid over it vs vLLM alone",
        baseline="vLLM alone, each conversation resent whole (its own prefix cache)",
        columns=[
            "conversations",
            "superfluid over vLLM",
            "cached tokens (vLLM's count)",
            "prompt tokens",
            "vLLM alone (baseline)",
            "superfluid / alone",
        ],
    )
    if not vllm_built():
        section.rows.append(["-"] * len(section.columns))
        section.notes.append("not run: no vLLM venv (`jupyter superfluid build-vllm`)")
        section.target("TTFT overhead <= 10% over vLLM alone", "-", None)
        return section
    full = ctx.cfg.name == "full"
    count, words, rounds = (COUNT, HISTORY_WORDS, ROUNDS) if full else (2, 40, 1)
    measured = await _measure(ctx, count, words, rounds)
    s_sf, s_alone = ttft_summary(measured["superfluid"]), ttft_summary(measured["alone"])
    rel = ratio_of(s_sf, s_alone)
    warm = _warm_fraction(measured["superfluid"])
    section.data = {"superfluid": s_sf, "alone": s_alone, "ratio": rel, "warm_fraction": warm}
    section.rows.append(
        [
            str(count),
            spread(s_sf),
            str(median_of([r.cached_tokens for r in measured["superfluid"]])),
            str(median_of([r.input_tokens for r in measured["superfluid"]])),
            spread(s_alone),
            times(rel),
        ]
    )
    section.target(
        f"TTFT overhead <= 10% over vLLM alone, {count} conversations",
        times(rel),
        None if rel is None else rel <= TTFT_OVERHEAD_TARGET,
    )
    section.target(
        "continuations warm by vLLM's count",
        "-" if warm is None else f"at least {warm:.0%} of each continued turn's whole blocks",
        None if warm is None else warm >= 0.95,
    )
    section.notes.append(
        f"{rounds} rounds of {count} conversations, after {WARM_ROUNDS} unmeasured (about "
        f"{words * 5} tokens of history each); {OUTPUT_TOKENS} output tokens a turn."
    )
    return section

"""Scenario 4, streaming overhead: tokens/s over HTTP SSE vs the raw in-process loop.

The same short prompt generates a fixed number of tokens (end-of-turn banned)
three ways: streamed from superfluid's ``/v1/responses``; streamed from
``llama_cpp.server``'s chat completions; and with ``llama_cpp.Llama.generate``
in this process on the same GGUF, threads, context and batch (the baseline).
The rate is decode only: tokens after the first over the time from the first
to the last (text delta, or yielded token).
"""

from __future__ import annotations

import statistics
import time

import llama_cpp

from ..context import Context
from ..conversation import INSTRUCTIONS, Conversation
from ..stats import summary
from ..turns import chat_whole, sf_whole
from .common import Section, times

PROMPT_TOKENS = 32


def _rate_cell(s: dict) -> str:
    """``median (low-high) tok/s``."""
    if not s or s.get("median") is None:
        return "-"
    low, high = ("min", "max") if s["n"] < 10 else ("p10", "p90")
    return f"{s['median']:.0f} ({s[low]:.0f}-{s[high]:.0f}) tok/s"


def raw_rates(ctx: Context, user: str) -> list[float]:
    """Decode tokens/s of ``Llama.generate`` in-process, one per repetition (after a warm-up)."""
    cfg = ctx.cfg
    llm = llama_cpp.Llama(
        str(ctx.model),
        n_ctx=cfg.ctx_size,
        n_threads=cfg.threads,
        n_threads_batch=cfg.threads,
        n_batch=cfg.n_batch,
        verbose=False,
    )
    prompt = (
        f"<|im_start|>system\n{INSTRUCTIONS}<|im_end|>\n<|im_start|>user\n{user}<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    tokens = llm.tokenize(prompt.encode(), add_bos=False, special=True)
    rates = []
    for rep in range(cfg.reps + 1):
        llm.set_seed(rep)
        stamps = []
        # generate() runs on past the end-of-turn token: every run is stream_tokens long.
        for token in llm.generate(tokens, temp=0.8, top_p=0.95, top_k=0, min_p=0.0):
            stamps.append(time.monotonic())
            del token
            if len(stamps) == cfg.stream_tokens:
                break
        if rep:  # the first run is the warm-up
            rates.append((len(stamps) - 1) / (stamps[-1] - stamps[0]))
        llm.reset()
    llm.close()
    return rates


async def run(ctx: Context) -> Section:
    """Measure the three rates; one table row."""
    cfg = ctx.cfg
    user = ctx.tokenizer.text(PROMPT_TOKENS, seed=40_000)
    conv = Conversation("stream")
    n = cfg.stream_tokens
    server = await ctx.superfluid()
    try:
        async with ctx.http() as http:
            sf = [
                await sf_whole(http, server, conv, user, max_tokens=n, seed=r)
                for r in range(cfg.reps)
            ]
    finally:
        server.stop()
    llama = await ctx.llama_cpp_server()
    lc = []
    if llama is not None:
        async with ctx.http() as http:
            lc = [
                await chat_whole(http, llama, conv, user, max_tokens=n, seed=r)
                for r in range(cfg.reps)
            ]
    raw = raw_rates(ctx, user)
    ctx.log("streaming: done")
    s_sf = summary([x for r in sf if (x := r.decode_rate())])
    s_lc = summary([x for r in lc if (x := r.decode_rate())])
    s_raw = summary(raw)
    ratio = s_sf["median"] / s_raw["median"] if s_sf["median"] and s_raw["median"] else None
    ratio_lc = s_lc["median"] / s_raw["median"] if s_lc["median"] and s_raw["median"] else None
    section = Section(
        id="streaming",
        title=f"4. Streaming: decode tokens/s of a {n}-token answer",
        baseline="llama_cpp.Llama.generate in-process, same model, threads, context, batch",
        columns=[
            "superfluid /v1/responses SSE",
            "raw Llama.generate (baseline)",
            "superfluid / raw",
            "llama_cpp.server SSE",
            "llama_cpp.server / raw",
        ],
        rows=[
            [_rate_cell(s_sf), _rate_cell(s_raw), times(ratio), _rate_cell(s_lc), times(ratio_lc)]
        ],
        data={
            "superfluid": s_sf,
            "raw": s_raw,
            "llama_cpp": s_lc,
            "ratio": ratio,
            "llama_cpp_ratio": ratio_lc,
        },
    )
    deltas = statistics.median([r.deltas for r in sf]) if sf else None
    section.notes.append(
        f"Text delta events per superfluid stream (median): {deltas} for {n} tokens."
    )
    section.target(
        ">= 0.95 of the raw loop's tokens/s over SSE",
        times(ratio),
        None if ratio is None else ratio >= 0.95,
    )
    return section

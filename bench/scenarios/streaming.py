"""Scenario 4, streaming overhead: tokens/s over HTTP SSE vs the raw in-process loop.

The same short prompt generates a fixed number of tokens (end-of-turn banned)
three ways: streamed from superfluid's ``/v1/responses``; streamed from
``llama_cpp.server``'s chat completions; and with ``llama_cpp.Llama.generate``
in this process on the same GGUF, threads, context and batch (the baseline).
The rate is decode only: tokens after the first over the time from the first
to the last (text delta, or yielded token). The three alternate repetition by
repetition, so a burst of load from elsewhere hits all of them alike.
"""

from __future__ import annotations

import statistics
import time

import llama_cpp

from ..client import StreamResult
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


class RawLoop:
    """``Llama.generate`` in this process on the bench model, with the servers' settings."""

    def __init__(self, ctx: Context, user: str) -> None:
        cfg = ctx.cfg
        self.n = cfg.stream_tokens
        self.llm = llama_cpp.Llama(
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
        self.tokens = self.llm.tokenize(prompt.encode(), add_bos=False, special=True)

    def rate(self, seed: int) -> float:
        """Decode tokens/s of one generation of ``n`` tokens from a reset context."""
        self.llm.reset()
        self.llm.set_seed(seed)
        stamps: list[float] = []
        # generate() runs on past the end-of-turn token: every run is n tokens long.
        for _ in self.llm.generate(self.tokens, temp=0.8, top_p=0.95, top_k=0, min_p=0.0):
            stamps.append(time.monotonic())
            if len(stamps) == self.n:
                break
        return (len(stamps) - 1) / (stamps[-1] - stamps[0])

    def close(self) -> None:
        """Free the model."""
        self.llm.close()


async def _measure(ctx: Context, user: str) -> tuple[list, list, list[float]]:
    """Superfluid streams, llama_cpp.server streams and raw rates, one of each per repetition.

    Side by side, so a burst of load from elsewhere hits all three alike.
    """
    conv, n = Conversation("stream"), ctx.cfg.stream_tokens
    raw = RawLoop(ctx, user)
    raw.rate(0)  # warm-up
    llama = await ctx.llama_cpp_server()
    server = await ctx.superfluid()
    sf: list[StreamResult] = []
    lc: list[StreamResult] = []
    rates: list[float] = []
    try:
        async with ctx.http() as http:
            for rep in range(ctx.cfg.reps):
                sf.append(await sf_whole(http, server, conv, user, max_tokens=n, seed=rep))
                if llama is not None:
                    lc.append(await chat_whole(http, llama, conv, user, max_tokens=n, seed=rep))
                rates.append(raw.rate(rep + 1))
    finally:
        server.stop()
        raw.close()
    return sf, lc, rates


def _over(top: dict, bottom: dict) -> float | None:
    """top / bottom medians."""
    return top["median"] / bottom["median"] if top["median"] and bottom["median"] else None


async def run(ctx: Context) -> Section:
    """Measure the three rates; one table row."""
    n = ctx.cfg.stream_tokens
    user = ctx.tokenizer.text(PROMPT_TOKENS, seed=40_000)
    sf, lc, rates = await _measure(ctx, user)
    s_raw = summary(rates)
    ctx.log("streaming: done")
    s_sf = summary([x for r in sf if (x := r.decode_rate())])
    s_lc = summary([x for r in lc if (x := r.decode_rate())])
    ratio, ratio_lc = _over(s_sf, s_raw), _over(s_lc, s_raw)
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
        data={"superfluid": s_sf, "raw": s_raw, "llama_cpp": s_lc, "ratio": ratio,
              "llama_cpp_ratio": ratio_lc},
    )  # fmt: skip
    cells = [_rate_cell(s_sf), _rate_cell(s_raw), times(ratio), _rate_cell(s_lc)]
    section.rows.append([*cells, times(ratio_lc)])
    deltas = statistics.median([r.deltas for r in sf]) if sf else None
    section.notes.append(f"Text delta events per superfluid stream (median): {deltas} for {n}.")
    met = None if ratio is None else ratio >= 0.95
    section.target(">= 0.95 of the raw loop's tokens/s over SSE", times(ratio), met)
    return section

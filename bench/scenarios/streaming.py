"""Scenario 4, streaming: decode tokens/s of one stream, over HTTP SSE and through the engine seam.

The same short prompt generates a fixed number of tokens (end-of-turn banned) in
every way compared, one after another in each repetition (so a burst of load from
elsewhere hits all of them alike):

- ``llama_cpp.Llama.generate`` in this process on the same GGUF, threads, context
  and batch: the raw loop, the baseline;
- superfluid's ``/v1/responses`` SSE (its engine runs in an engine process);
- the engine seam itself, in this process: ``ProcessEngine.generate`` (the engine
  process, what the server uses) against ``LlamaEngine.generate`` (the same engine
  in a thread of this process): what crossing the process boundary costs per token;
- llama.cpp's C++ ``llama-server`` (one slot) and ``llama_cpp.server`` SSE.

The rate is decode only: tokens after the first over the time from the first to
the last (text delta, or token).
"""

from __future__ import annotations

import time
from typing import Any

import llama_cpp

from bench.context import Context
from bench.conversation import INSTRUCTIONS, Conversation
from bench.model import eos_id
from bench.scenarios.common import Section, times
from bench.stats import summary
from bench.turns import chat_whole, sf_whole
from jupyter_superfluid.engine.base import Engine, GenerateRequest, SamplingParams, TokenGenerated
from jupyter_superfluid.engine.local.llama import LlamaEngine
from jupyter_superfluid.engine.process.client import ProcessEngine

PROMPT_TOKENS = 32


def _rate_cell(s: dict | None) -> str:
    """``median (low-high) tok/s``."""
    if not s or s.get("median") is None:
        return "-"
    low, high = ("min", "max") if s["n"] < 10 else ("p10", "p90")
    return f"{s['median']:.0f} ({s[low]:.0f}-{s[high]:.0f}) tok/s"


def _prompt(user: str) -> str:
    return (
        f"<|im_start|>system\n{INSTRUCTIONS}<|im_end|>\n<|im_start|>user\n{user}<|im_end|>\n"
        "<|im_start|>assistant\n"
    )


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
        self.tokens = self.llm.tokenize(_prompt(user).encode(), add_bos=False, special=True)

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


class SeamLoop:
    """One engine behind the Engine seam, timed per token as a consumer sees them."""

    def __init__(self, engine: Engine, prompt: list[int], n: int) -> None:
        self.engine, self.prompt, self.n = engine, tuple(prompt), n

    async def rate(self, seed: int) -> float:
        """Decode tokens/s of one ``n``-token generation."""
        sampling = SamplingParams(seed=seed, max_tokens=self.n, logit_bias={eos_id(): -100.0})
        stamps: list[float] = []
        async for event in self.engine.generate(GenerateRequest(self.prompt, sampling)):
            if isinstance(event, TokenGenerated):
                stamps.append(time.monotonic())
        return (len(stamps) - 1) / (stamps[-1] - stamps[0])


async def _seam_engines(ctx: Context) -> tuple[LlamaEngine, ProcessEngine]:
    """The engine in a thread of this process and in an engine process, same settings."""
    cfg = ctx.cfg
    options: dict[str, Any] = {
        "context_size": cfg.ctx_size,
        "threads": cfg.threads,
        "cache_slots": cfg.cache_slots,
        "batch_size": cfg.n_batch,
    }
    if cfg.kv_tokens:
        options["kv_tokens"] = cfg.kv_tokens
    thread = LlamaEngine.load("bench", ctx.model, **options)
    process = await ProcessEngine.start("bench", ctx.model, **options)
    return thread, process


async def _measure(ctx: Context, user: str) -> dict[str, list[float]]:
    """Every way's decode rates, one of each per repetition (after one warm-up each)."""
    conv, n = Conversation("stream"), ctx.cfg.stream_tokens
    raw = RawLoop(ctx, user)
    thread, process = await _seam_engines(ctx)
    tokens = thread.tokenize(_prompt(user))
    seams = {"thread": SeamLoop(thread, tokens, n), "process": SeamLoop(process, tokens, n)}
    llama = await ctx.llama_cpp_server()
    native = await ctx.llama_server(1)
    server = await ctx.superfluid()
    rates: dict[str, list[float]] = {k: [] for k in ("raw", "sf", "thread", "process", "ls", "lc")}
    try:
        raw.rate(0)
        for seam in seams.values():
            await seam.rate(0)
        async with ctx.http() as http:
            for rep in range(ctx.cfg.rate_reps):
                rates["raw"].append(raw.rate(rep + 1))
                r = await sf_whole(http, server, conv, user, max_tokens=n, seed=rep)
                rates["sf"].extend([x] if (x := r.decode_rate()) else [])
                for key, seam in seams.items():
                    rates[key].append(await seam.rate(rep + 1))
                for key, other in (("ls", native), ("lc", llama)):
                    if other is not None:
                        r = await chat_whole(http, other, conv, user, max_tokens=n, seed=rep)
                        rates[key].extend([x] if (x := r.decode_rate()) else [])
    finally:
        server.stop()
        if native is not None:
            native.stop()
        await process.close()
        thread.close_sync()
        raw.close()
    return rates


def _over(top: dict, bottom: dict) -> float | None:
    """top / bottom medians."""
    return top["median"] / bottom["median"] if top.get("median") and bottom.get("median") else None


ROWS = (
    ("raw", "raw Llama.generate in-process (baseline)"),
    ("sf", "superfluid /v1/responses SSE (engine process)"),
    ("process", "ProcessEngine.generate: the engine process, through the seam"),
    ("thread", "LlamaEngine.generate: the same engine in a thread of this process"),
    ("ls", "llama-server SSE, 1 slot"),
    ("lc", "llama_cpp.server SSE"),
)


async def run(ctx: Context) -> Section:
    """Measure every way; one table row each."""
    n = ctx.cfg.stream_tokens
    user = ctx.tokenizer.text(PROMPT_TOKENS, seed=40_000)
    rates = await _measure(ctx, user)
    ctx.log("streaming: done")
    s = {key: summary(values) for key, values in rates.items()}
    section = Section(
        id="streaming",
        title=f"4. Streaming: decode tokens/s of a {n}-token answer",
        baseline="llama_cpp.Llama.generate in-process, same model, threads, context, batch",
        columns=["stream", "decode rate", "/ raw loop", "/ llama-server"],
        data={key: s[key] for key in s},
    )
    for key, label in ROWS:
        if s[key].get("median") is None:
            continue
        row = [label, _rate_cell(s[key]), times(_over(s[key], s["raw"]))]
        section.rows.append([*row, times(_over(s[key], s["ls"]))])
    sse, seam = _over(s["sf"], s["raw"]), _over(s["process"], s["thread"])
    native = _over(s["sf"], s["ls"])
    per_token = None
    if s["process"].get("median") and s["thread"].get("median"):
        per_token = 1e6 / s["process"]["median"] - 1e6 / s["thread"]["median"]
    section.data.update(
        {"ratio": sse, "seam_ratio": seam, "llama_server_ratio": native, "seam_us": per_token}
    )
    if per_token is not None:
        verb = "costs" if per_token >= 0 else "saves"
        section.notes.append(
            f"The engine in its own process {verb} {abs(per_token):.0f} µs per token "
            "against the same engine in a thread (ProcessEngine vs LlamaEngine, medians)."
        )
    section.target(">= 0.95 of the raw loop's tokens/s over SSE", times(sse), _at_least(sse, 0.95))
    seam_target = ">= 0.95: the engine process vs the same engine in-process"
    section.target(seam_target, times(seam), _at_least(seam, 0.95))
    section.target(
        ">= 0.9 of llama-server's single-stream decode", times(native), _at_least(native, 0.9)
    )
    return section


def _at_least(value: float | None, target: float) -> bool | None:
    return None if value is None else value >= target

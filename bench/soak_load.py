"""A sustained mixed load: clients sending the requests a shared server really gets.

Each client repeats, until the deadline, a seeded cycle of the mix: continuing
its own stored conversation (``previous_response_id``), starting a new stored
one, one-off chat completions under shared instructions (a prefix that recurs),
Responses with ``store: false``, and LMSP requests without ``store``. Only the
stored conversations can ever be continued; everything else is what a cache
should not keep. The load samples the server's resident memory while it runs
and counts finished requests per time window.

A cycle, not a random draw per request: every cycle of a client asks the same
work (the same kinds, the same conversation lengths), so a later window asks
what the first did and only the states piling up differ. Drawn per request, the
windows' mean input was 182-191 tokens in the first and 210-223 in the second
(conversations start short, and a few grew long), and the CPU time per request
followed it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import httpx

from bench.client import StreamResult, stream_chat, stream_response
from bench.conversation import INSTRUCTIONS, Tokenizer
from bench.model import MODEL_ID, eos_logit_bias
from bench.servers import Server
from bench.turns import SHORT

# What a client does next, with its weight.
MIX = (
    ("continue", 35),  # Responses, previous_response_id: the stored conversation goes on
    ("new", 15),  # Responses, stored: a new conversation (the old one is left idle)
    ("chat", 25),  # chat completions: a one-off under shared instructions
    ("unstored", 15),  # Responses with store false: a one-off
    ("lmsp", 10),  # LMSP without store: a one-off
)
CYCLE = 20  # requests in a client's cycle: MIX's weights in twentieths
SHARED_INSTRUCTIONS = INSTRUCTIONS + " " + "Keep to the facts and cite the cell. " * 12
OUTPUT_TOKENS = 24
# The engine's counters reported per window: what its work was, beside the rate.
ENGINE_COUNTERS = (
    "prompt_tokens_evaluated",
    "tokens_generated",
    "parked",
    "restored",
    "restored_from_disk",
    "states_saved",
    "ram_evicted",
    "slots_dropped",
)


@dataclass
class SoakConfig:
    """How long and how hard: clients, seconds, windows, message sizes."""

    clients: int = 8
    seconds: float = 240.0
    windows: int = 4  # throughput is reported per window (e.g. per minute of 4)
    user_tokens: int = 48  # a new user message
    opening_tokens: int = 160  # the first message of a new conversation
    seed: int = 0


def cycle(rng: random.Random) -> list[str]:
    """One client's cycle of request kinds: MIX's weights, opening with a new conversation.

    Opening with ``new`` makes every cycle alike from the first: each continues only
    conversations it started, so their lengths are the same in every repeat.
    """
    kinds = [kind for kind, weight in MIX for _ in range(weight * CYCLE // 100)]
    kinds.remove("new")
    rng.shuffle(kinds)
    return ["new", *kinds]


@dataclass
class SoakResult:
    """Finished requests per window and kind, errors, memory samples, the server's counters."""

    done: list[int] = field(default_factory=list)  # per window
    prompts: list[int] = field(default_factory=list)  # input tokens of those requests, per window
    cpu: list[float] = field(default_factory=list)  # the server's CPU seconds, per window
    engine: list[dict[str, int]] = field(default_factory=list)  # ENGINE_COUNTERS, per window
    steal: list[float] = field(default_factory=list)  # stolen CPU s so far: start, window ends
    kinds: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    first_error: str = ""
    rss: list[tuple[float, int]] = field(default_factory=list)  # (seconds, bytes)
    cached_tokens: int = 0
    input_tokens: int = 0
    wall: float = 0.0
    stats: dict[str, Any] = field(default_factory=dict)

    def rates(self, seconds_per_window: float) -> list[float]:
        """Requests per second in each window."""
        return [n / seconds_per_window for n in self.done]

    def cpu_ms_per_request(self) -> list[float | None]:
        """The server's CPU milliseconds per finished request, in each window.

        Less sensitive than the rate to what else runs on a shared machine.
        """
        return [1000 * c / n if n else None for c, n in zip(self.cpu, self.done, strict=True)]

    def prompt_tokens_per_request(self) -> list[float | None]:
        """The mean input tokens of the requests finished in each window: what each asked."""
        return [t / n if n else None for t, n in zip(self.prompts, self.done, strict=True)]

    def stolen_per_window(self) -> list[float]:
        """CPU seconds the host took from this virtual machine in each window (``steal``)."""
        return [b - a for a, b in zip(self.steal, self.steal[1:], strict=False)]

    def to_json(self) -> dict[str, Any]:
        """Plain JSON values (RSS thinned to at most 60 samples)."""
        step = max(1, len(self.rss) // 60)
        return {
            "done": self.done,
            "prompt_tokens_per_request": [
                None if v is None else round(v, 1) for v in self.prompt_tokens_per_request()
            ],
            "cpu_ms_per_request": [
                None if v is None else round(v, 2) for v in self.cpu_ms_per_request()
            ],
            "engine_per_window": self.engine,
            "steal_s_per_window": [round(v, 2) for v in self.stolen_per_window()],
            "kinds": dict(self.kinds),
            "errors": dict(self.errors),
            "first_error": self.first_error,
            "rss_mib": [(round(t, 1), round(b / 2**20, 1)) for t, b in self.rss[::step]],
            "cached_tokens": self.cached_tokens,
            "input_tokens": self.input_tokens,
            "wall_s": round(self.wall, 1),
            "server_stats": self.stats,
        }


class _Client:
    """One client's conversation and its seeded choices."""

    def __init__(self, n: int, cfg: SoakConfig, tokenizer: Tokenizer) -> None:
        self.n = n
        self.cfg = cfg
        self.tokenizer = tokenizer
        self.kinds = cycle(random.Random(cfg.seed * 1000 + n))
        self.picked = 0
        self.previous: str | None = None
        self.turn = 0

    def text(self, tokens: int) -> str:
        """Fresh seeded words (no two requests share them)."""
        self.turn += 1
        return self.tokenizer.text(tokens, seed=1_000_000 * (self.n + 1) + self.turn)

    def pick(self) -> str:
        """The next kind of request: the cycle's, in turn."""
        kind = self.kinds[self.picked % len(self.kinds)]
        self.picked += 1
        if kind == "continue" and self.previous is None:  # the opening failed
            kind = "new"
        return kind

    async def request(self, http: httpx.AsyncClient, server: Server, kind: str) -> StreamResult:
        """Send one request of ``kind``."""
        sampling = {"seed": self.turn, "logit_bias": eos_logit_bias(SHORT)}
        if kind == "chat":
            body = {
                "model": MODEL_ID,
                "messages": [
                    {"role": "system", "content": SHARED_INSTRUCTIONS},
                    {"role": "user", "content": self.text(self.cfg.user_tokens)},
                ],
                "max_tokens": OUTPUT_TOKENS,
                **sampling,
            }
            return await stream_chat(http, server.url + "/v1/chat/completions", body)
        if kind == "lmsp":
            return await _lmsp(http, server, self.text(self.cfg.user_tokens), self.turn)
        body = {"model": MODEL_ID, "max_output_tokens": OUTPUT_TOKENS, **sampling}
        if kind == "continue":
            body |= {
                "previous_response_id": self.previous,
                "input": self.text(self.cfg.user_tokens),
            }
        elif kind == "new":
            body |= {"instructions": INSTRUCTIONS, "input": self.text(self.cfg.opening_tokens)}
        else:
            body |= {"store": False, "input": self.text(self.cfg.user_tokens)}
        result = await stream_response(http, server.url + "/v1/responses", body)
        if kind in ("continue", "new") and result.response_id and result.status == "completed":
            self.previous = result.response_id
        return result


async def _lmsp(http: httpx.AsyncClient, server: Server, text: str, seed: int) -> StreamResult:
    """A non-streamed LMSP response without ``store``."""
    result = StreamResult()
    body = {
        "model": MODEL_ID,
        "input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}
        ],
        "max_output_tokens": OUTPUT_TOKENS,
        "extensions": {"superfluid": {"seed": seed}},
    }
    started = time.monotonic()
    try:
        r = await http.post(
            server.url + "/lmsp/v1/responses", json=body, headers={"LMSP-Version": "1.0"}
        )
        if r.status_code != 200:
            result.error = f"HTTP {r.status_code}: {r.text[:300]}"
        else:
            data = r.json()
            result.status = data.get("status")
            usage = data.get("usage") or {}
            result.input_tokens = usage.get("input_tokens")
            result.cached_tokens = (usage.get("input_tokens_details") or {}).get("cached_tokens")
    except httpx.HTTPError as err:
        result.error = f"{type(err).__name__}: {err}"
    result.total = time.monotonic() - started
    return result


async def _sample(
    server: Server, out: SoakResult, started: float, window: float, stop: asyncio.Event
) -> None:
    """The server's RSS every half second, its CPU time and engine counters per window."""
    cpu0 = server.cpu()
    async with httpx.AsyncClient(timeout=60, trust_env=False) as http:
        counted, at = await _engine_counters(http, server), 0
        out.steal.append(_steal_seconds())  # the start; windows are its differences
        while not stop.is_set():
            now = time.monotonic() - started
            out.rss.append((now, server.rss()))
            k = min(int(now / window), len(out.cpu) - 1)
            cpu = server.cpu()
            out.cpu[k] += cpu - cpu0
            cpu0 = cpu
            if k > at:  # a window ended: its counters
                counted, at = await _engine_window(http, server, out, counted), k
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.5)
        await _engine_window(http, server, out, counted)


async def _engine_counters(http: httpx.AsyncClient, server: Server) -> dict[str, int]:
    """The engine's ENGINE_COUNTERS now."""
    stats = (await http.get(server.url + f"/v1/models/{MODEL_ID}")).json().get("superfluid", {})
    return {name: int(stats.get(name) or 0) for name in ENGINE_COUNTERS}


async def _engine_window(
    http: httpx.AsyncClient, server: Server, out: SoakResult, before: dict[str, int]
) -> dict[str, int]:
    """Append the counters' growth since ``before`` as the next window's; the counters now."""
    now = await _engine_counters(http, server)
    out.engine.append({name: now[name] - before[name] for name in ENGINE_COUNTERS})
    out.steal.append(_steal_seconds())
    return now


def _steal_seconds() -> float:
    """CPU seconds this virtual machine's CPUs were stolen by the host so far (0: not known).

    A window's share of it (``SoakResult.steal``, as differences) shows when the machine,
    not the server, ran slower.
    """
    try:
        with open("/proc/stat") as stat:
            fields = stat.readline().split()
        return int(fields[8]) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


async def soak(server: Server, tokenizer: Tokenizer, cfg: SoakConfig) -> SoakResult:
    """Run the mixed load on ``server`` for ``cfg.seconds``; what it measured."""
    out = SoakResult(done=[0] * cfg.windows, prompts=[0] * cfg.windows, cpu=[0.0] * cfg.windows)
    started = time.monotonic()
    deadline = started + cfg.seconds
    window = cfg.seconds / cfg.windows
    stop = asyncio.Event()

    async def client(n: int, http: httpx.AsyncClient) -> None:
        me = _Client(n, cfg, tokenizer)
        while time.monotonic() < deadline:
            kind = me.pick()
            result = await me.request(http, server, kind)
            now = time.monotonic()
            if result.error or result.status is None:
                out.errors[kind] += 1
                out.first_error = out.first_error or (result.error or "no status")
                continue
            if now <= deadline:
                k = min(int((now - started) / window), cfg.windows - 1)
                out.done[k] += 1
                out.prompts[k] += result.input_tokens or 0
            out.kinds[kind] += 1
            out.cached_tokens += result.cached_tokens or 0
            out.input_tokens += result.input_tokens or 0

    limits = httpx.Limits(max_connections=64, max_keepalive_connections=64)
    async with httpx.AsyncClient(timeout=600, limits=limits, trust_env=False) as http:
        sampler = asyncio.create_task(_sample(server, out, started, window, stop))
        await asyncio.gather(*(client(n, http) for n in range(cfg.clients)))
        stop.set()
        await sampler
        out.wall = time.monotonic() - started
        r = await http.get(server.url + f"/v1/models/{MODEL_ID}")
        out.stats = r.json().get("superfluid", {})
    return out

"""The KV layouts side by side: one unified cache against a KV stream per slot.

``python -m bench.kv_layout [--tiny] [--reps N]`` builds two contexts on the bench model
in this process, one of each layout with the same cells per slot, and times on both, in
turn (so load from elsewhere hits both alike):

- a lone decode on an empty cache, and with six idle 1.5k-token conversations resident;
- a fork: a 2000-token conversation copied into another slot, then a 30-token turn there;
- a continued turn (60 new tokens, then 4 decoded) among four resident 2k conversations.

It uses llama.cpp directly (the engine's ``native`` wrappers), not a server: it isolates
what the layout costs from everything above it. The engine's default is the stream per
slot (``jupyter_superfluid/engine/local/native.py``); this is why.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable
from typing import Any

import llama_cpp.llama_cpp as L

from bench.config import BenchConfig, full, tiny
from bench.direct_decode import feed
from bench.model import model_path
from jupyter_superfluid.engine.local import native

SLOTS = 8


class Layout:
    """One context of one layout, with a batch to feed it."""

    def __init__(self, model: Any, cfg: BenchConfig, per_slot: int, *, unified: bool) -> None:
        self.name = "unified" if unified else "a stream per slot"
        self.ctx = native.create_context(
            model,
            n_ctx=SLOTS * per_slot,
            n_seq_max=SLOTS,
            n_batch=cfg.n_batch,
            threads=cfg.threads,
            unified=unified,
        )
        self.memory = L.llama_get_memory(self.ctx)
        self.batch = L.llama_batch_init(cfg.n_batch, 0, 1)
        self.n_batch = cfg.n_batch
        self.rng = random.Random(1)

    def tokens(self, n: int) -> list[int]:
        """``n`` random byte-level tokens."""
        return [self.rng.randrange(3, 250) for _ in range(n)]

    def feed(self, seq: int, tokens: list[int], pos0: int) -> None:
        """Decode ``tokens`` into ``seq`` from ``pos0``, in batches; logits for the last."""
        try:
            feed(self.ctx, self.batch, self.n_batch, seq, tokens, pos0)
        except RuntimeError as err:
            raise RuntimeError(f"{err} ({self.name})") from None

    def clear(self) -> None:
        """Empty every sequence."""
        L.llama_memory_clear(self.memory, True)

    def end(self, seq: int) -> int:
        """The next position of ``seq``."""
        return int(L.llama_memory_seq_pos_max(self.memory, seq)) + 1

    def close(self) -> None:
        """Free the batch and the context."""
        L.llama_batch_free(self.batch)
        L.llama_free(self.ctx)


def lone_decode(layout: Layout, residents: int, resident_tokens: int, n: int = 64) -> float:
    """Tokens/s of one sequence decoding ``n`` tokens beside ``residents`` idle ones."""
    layout.clear()
    for seq in range(1, residents + 1):
        layout.feed(seq, layout.tokens(resident_tokens), 0)
    layout.feed(0, layout.tokens(32), 0)
    started = time.perf_counter()
    for k in range(n):
        layout.feed(0, layout.tokens(1), 32 + k)
    return n / (time.perf_counter() - started)


def fork_turn(layout: Layout, length: int) -> float:
    """Milliseconds to copy a ``length``-token sequence into another slot (all but its
    last 30 tokens, as the engine copies a branch's prefix) and run 30 tokens there."""
    layout.clear()
    layout.feed(0, layout.tokens(length), 0)
    started = time.perf_counter()
    if layout.name == "unified":
        L.llama_memory_seq_cp(layout.memory, 0, 1, 0, length - 30)
    else:  # between streams llama.cpp copies a whole stream; the tail goes after
        L.llama_memory_seq_cp(layout.memory, 0, 1, -1, -1)
        L.llama_memory_seq_rm(layout.memory, 1, length - 30, -1)
    layout.feed(1, layout.tokens(30), length - 30)
    return (time.perf_counter() - started) * 1000


def continued_turn(layout: Layout, residents: int, history: int) -> float:
    """Median milliseconds of a turn (60 new tokens, 4 decoded) continuing one of
    ``residents`` conversations of ``history`` tokens, each continued twice in turn."""
    layout.clear()
    for seq in range(residents):
        layout.feed(seq, layout.tokens(history), 0)
    times = []
    for _ in range(2):
        for seq in range(residents):
            started = time.perf_counter()
            pos = layout.end(seq)
            layout.feed(seq, layout.tokens(60), pos)
            for k in range(4):
                layout.feed(seq, layout.tokens(1), pos + 60 + k)
            times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def measures(cfg: BenchConfig) -> dict[str, Callable[[Layout], float]]:
    """The measured cases, by name (sizes scaled to the config's window)."""
    long = min(2000, cfg.ctx_size // 2)
    resident = min(1500, cfg.ctx_size // 2)
    return {
        "lone decode, empty (tok/s)": lambda lay: lone_decode(lay, 0, resident),
        "lone decode, 6 idle resident (tok/s)": lambda lay: lone_decode(lay, 6, resident),
        "fork + 30-token turn (ms)": lambda lay: fork_turn(lay, long),
        "continued turn, 4 resident (ms)": lambda lay: continued_turn(lay, 4, long),
    }


def run(cfg: BenchConfig, reps: int) -> dict[str, dict[str, float]]:
    """Median of ``reps`` of every measure, per layout, the layouts in turn."""
    native.init_backend()
    model = native.load_model(model_path(cfg.shape))
    per_slot = min(cfg.ctx_size, 4096)
    layouts = [Layout(model, cfg, per_slot, unified=u) for u in (True, False)]
    samples: dict[str, dict[str, list[float]]] = {lay.name: {} for lay in layouts}
    try:
        for _ in range(reps):
            for name, measure in measures(cfg).items():
                for lay in layouts:
                    samples[lay.name].setdefault(name, []).append(measure(lay))
    finally:
        for lay in layouts:
            lay.close()
        L.llama_model_free(model)
    return {
        layout: {name: statistics.median(values) for name, values in by_name.items()}
        for layout, by_name in samples.items()
    }


def table(results: dict[str, dict[str, float]]) -> str:
    """The medians as a Markdown table, a row per measure."""
    unified, streams = results["unified"], results["a stream per slot"]
    lines = ["| measure | unified | a stream per slot |", "|---|---|---|"]
    lines += [f"| {name} | {unified[name]:.1f} | {streams[name]:.1f} |" for name in unified]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Run and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="the 2-layer test shape")
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args(argv)
    print(table(run(tiny() if args.tiny else full(), args.reps)))


if __name__ == "__main__":
    main()

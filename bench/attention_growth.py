"""How much a warm turn grows with history in llama.cpp itself: the floor under any server.

``python -m bench.attention_growth [--tiny] [--reps N]`` builds one single-sequence
context on the bench model in this process, fills it with the longest history, and
times evaluating a turn's new tokens (as many as a warm turn of scenario ``warm``
evaluates) over each history length, with flash attention off (the engine's setting, and
the bench's llama-server's) and on, in turn. No server, no HTTP, no copy: what remains is
llama.cpp's own cost, each new token attending over every cached one. Its longest /
shortest ratio is the least a warm turn of any server on llama.cpp can grow on this
machine. ``--width W --layers N`` measures another shape: attention's share of a turn
is about history / (6 x width) of the weights', so wider models grow less.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from dataclasses import replace
from typing import Any

import llama_cpp.llama_cpp as L

from bench.config import BenchConfig, full, tiny
from bench.direct_decode import feed
from bench.model import model_path
from jupyter_superfluid.engine.local import native

TURN_TOKENS = 40  # a warm turn's new cells: the user message, its template, the reply's opening
LAYOUTS = {"flash attention off": False, "flash attention on": True}


class History:
    """One context holding ``longest`` tokens of history, a turn evaluated over any prefix."""

    def __init__(self, model: Any, cfg: BenchConfig, longest: int, *, flash: bool) -> None:
        self.ctx = native.create_context(
            model,
            n_ctx=longest + TURN_TOKENS + 8,
            n_seq_max=1,
            n_batch=cfg.n_batch,
            threads=cfg.threads,
            flash_attention=flash,
        )
        self.memory = L.llama_get_memory(self.ctx)
        self.batch = L.llama_batch_init(cfg.n_batch, 0, 1)
        self.n_batch = cfg.n_batch
        rng = random.Random(7)
        history = [rng.randrange(3, 250) for _ in range(longest)]
        feed(self.ctx, self.batch, self.n_batch, 0, history, 0)
        self.turn = [rng.randrange(3, 250) for _ in range(TURN_TOKENS)]

    def turn_ms(self, history: int) -> float:
        """Milliseconds to evaluate the turn over the first ``history`` cached tokens.

        Cells past ``history`` are dropped first, so lengths are measured longest first.
        """
        L.llama_memory_seq_rm(self.memory, 0, history, -1)
        started = time.perf_counter()
        feed(self.ctx, self.batch, self.n_batch, 0, self.turn, history)
        elapsed = time.perf_counter() - started
        L.llama_memory_seq_rm(self.memory, 0, history, -1)
        return elapsed * 1000

    def close(self) -> None:
        """Free the batch and the context."""
        L.llama_batch_free(self.batch)
        L.llama_free(self.ctx)


def run(cfg: BenchConfig, reps: int) -> dict[str, dict[int, float]]:
    """Median milliseconds of the turn per layout and history length (the layouts in turn)."""
    native.init_backend()
    model = native.load_model(model_path(cfg.shape))
    lengths = sorted(cfg.histories, reverse=True)
    samples: dict[str, dict[int, list[float]]] = {name: {} for name in LAYOUTS}
    contexts = {
        name: History(model, cfg, lengths[0], flash=flash) for name, flash in LAYOUTS.items()
    }
    try:
        for history in lengths:
            for _ in range(reps):
                for name, context in contexts.items():
                    samples[name].setdefault(history, []).append(context.turn_ms(history))
    finally:
        for context in contexts.values():
            context.close()
        L.llama_model_free(model)
    return {
        name: {h: statistics.median(values) for h, values in sorted(by_length.items())}
        for name, by_length in samples.items()
    }


def table(results: dict[str, dict[int, float]]) -> str:
    """The medians as a Markdown table, a row per history length, and the growth."""
    names = list(results)
    lines = [f"| history (tokens) | {' | '.join(names)} |", "|---" * (len(names) + 1) + "|"]
    lengths = list(results[names[0]])
    for h in lengths:
        lines.append(f"| {h} | " + " | ".join(f"{results[n][h]:.1f} ms" for n in names) + " |")
    growth = [results[n][lengths[-1]] / results[n][lengths[0]] for n in names]
    lines.append("| longest / shortest | " + " | ".join(f"{g:.2f}x" for g in growth) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Run and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="the 2-layer test shape")
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--width", type=int, help="another model width (64 per head)")
    parser.add_argument("--layers", type=int, help="another number of layers")
    args = parser.parse_args(argv)
    cfg = tiny() if args.tiny else full()
    if args.width or args.layers:
        width, layers = args.width or cfg.shape.n_embd, args.layers or cfg.shape.n_layer
        shape = replace(cfg.shape, n_embd=width, n_head=max(1, width // 64), n_layer=layers)
        cfg = replace(cfg, shape=shape)
    print(table(run(cfg, args.reps)))


if __name__ == "__main__":
    main()

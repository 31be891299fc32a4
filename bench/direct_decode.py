"""Feeding tokens straight to a llama.cpp context, for the benchmarks that bypass every server."""

from __future__ import annotations

from typing import Any

import llama_cpp.llama_cpp as L


def feed(ctx: Any, batch: Any, n_batch: int, seq: int, tokens: list[int], pos0: int) -> None:
    """Decode ``tokens`` into sequence ``seq`` from position ``pos0``, ``n_batch`` at a time;
    logits for the last token only."""
    for start in range(0, len(tokens), n_batch):
        chunk = tokens[start : start + n_batch]
        for j, token in enumerate(chunk):
            batch.token[j] = token
            batch.pos[j] = pos0 + start + j
            batch.n_seq_id[j] = 1
            batch.seq_id[j][0] = seq
            batch.logits[j] = start + j == len(tokens) - 1
        batch.n_tokens = len(chunk)
        if L.llama_decode(ctx, batch) != 0:
            raise RuntimeError("llama_decode failed")

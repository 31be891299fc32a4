"""A generation as the worker runs it, and how a step lays sequences into a batch.

A step's ``llama_batch`` holds the next token of every generating sequence (one each, so
streams keep flowing) and, in the room left, chunks of prompts still being evaluated,
laid out in sequence-id order; a medium's embeddings go through a batch of their own (a
batch holds tokens or embeddings, not both). These functions only fill batches; the
worker decodes them.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from jupyter_superfluid.engine.base import EngineEvent
from jupyter_superfluid.engine.local.kv.prefix_cache import Slot
from jupyter_superfluid.engine.local.kv.state import Staged
from jupyter_superfluid.engine.local.sampling import Sampler, TextDecoder


@dataclass(eq=False)
class Sequence:
    """One generation as the worker runs it."""

    prompt: tuple[int, ...]
    max_tokens: int | None
    sampler: Sampler
    decoder: TextDecoder
    emit: Callable[[EngineEvent], bool]  # False once nobody can receive events
    cancelled: bool = False
    slot: Slot | None = None
    cached: int = 0
    pending: list[int] = field(default_factory=list)  # tokens to feed next
    completion: int = 0
    announced: bool = False  # PromptEvaluated sent
    finished: bool = False  # GenerationFinished sent
    suffix: tuple[int, ...] = ()  # fed into the cache after an end-of-generation token
    closing: bool = False  # finished, still feeding its last token and suffix
    media: tuple[tuple[int, Any], ...] = ()  # (prompt position, media.MediaPiece)
    retain: bool = False  # keep its state when moved out: a stored response points at it
    hashes: list[int] | None = None  # the prompt's block hashes (prefix_index)
    staging: bool = False  # its cached prefix is being read from disk
    staged: Staged | None = None  # what that read brought back

    def cancel(self) -> None:
        """Stop before the next token (called from any thread)."""
        self.cancelled = True


@dataclass
class Fed:
    """The tokens one sequence put into the current batch."""

    seq: Sequence
    count: int
    logits_index: int | None


def fill_token_batch(batch: Any, active: Iterable[Sequence], n_batch: int) -> list[Fed]:
    """Lay generating sequences' next tokens, then prompt chunks, into ``batch``.

    What goes in is chosen in that order of priority; it is laid out in sequence-id
    order, because with a KV stream per sequence llama.cpp puts into one micro-batch
    only sequences with consecutive ids in batch order, and runs the weights once
    per micro-batch: eight streams laid out 2,1,4,3,6,5,0,7 cost two passes (measured:
    35 ms a step against 18 ms in id order on the bench model).
    """
    chosen: list[tuple[Sequence, list[int]]] = []
    room = n_batch
    for seq in sorted(active, key=lambda s: len(s.pending) > 1):
        take = seq.pending[:room]
        if not take:
            break
        if take[0] < 0:
            continue  # a medium comes next: fill_media_batch
        take = _until_media(take)
        chosen.append((seq, take))
        room -= len(take)
    n, fed = 0, []
    for seq, take in sorted(chosen, key=lambda pair: _seq_id(pair[0])):
        n = _lay_tokens(batch, n, seq, take)
        done = len(take) == len(seq.pending)
        fed.append(Fed(seq, len(take), n - 1 if done and not seq.closing else None))
    batch.n_tokens = n
    return fed


def _seq_id(seq: Sequence) -> int:
    assert seq.slot is not None
    return seq.slot.seq_id


def _lay_tokens(batch: Any, n: int, seq: Sequence, take: list[int]) -> int:
    """Write ``take`` for ``seq`` into ``batch`` from index ``n``; the next free index."""
    assert seq.slot is not None
    pos0 = len(seq.slot.tokens)
    done = len(take) == len(seq.pending)
    for j, token in enumerate(take):
        i = n + j
        batch.token[i] = token
        batch.pos[i] = pos0 + j
        batch.n_seq_id[i] = 1
        batch.seq_id[i][0] = seq.slot.seq_id
        batch.logits[i] = done and j == len(take) - 1 and not seq.closing
    return n + len(take)


def fill_media_batch(batch: Any, seq: Sequence, n_batch: int) -> tuple[list[Fed], bool]:
    """Lay the media run at the head of ``seq``'s pending tokens into the embeddings batch.

    Also whether the run is the whole medium (all its positions in this one batch).
    """
    assert seq.slot is not None
    pos0 = len(seq.slot.tokens)
    start, piece = next((p, m) for p, m in seq.media if p <= pos0 < p + m.n_pos)
    run = min(start + piece.n_pos - pos0, n_batch)
    rows = piece.embeddings[pos0 - start : pos0 - start + run]
    ctypes.memmove(batch.embd, rows.ctypes.data, rows.nbytes)
    done = run == len(seq.pending)
    for j in range(run):
        batch.pos[j] = pos0 + j
        batch.n_seq_id[j] = 1
        batch.seq_id[j][0] = seq.slot.seq_id
        batch.logits[j] = done and j == run - 1
    batch.n_tokens = run
    return [Fed(seq, run, run - 1 if done else None)], pos0 == start and run == piece.n_pos


def _until_media(tokens: list[int]) -> list[int]:
    """``tokens`` up to the first media placeholder (negative id)."""
    for i, token in enumerate(tokens):
        if token < 0:
            return tokens[:i]
    return tokens

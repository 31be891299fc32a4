"""How a step lays sequences into a batch, and where a new sequence's slot is.

With a KV stream per slot llama.cpp runs only sequences of consecutive ids in one
micro-batch, so the batch is laid out in sequence-id order and a new sequence is
placed beside the running ones rather than across a gap.
"""

from __future__ import annotations

import threading
from typing import Any, cast

import llama_cpp.llama_cpp as L
from sf_engine_helpers import UNIFIED, chat_prompt, generate

from jupyter_superfluid.engine.base import (
    EngineEvent,
    GenerateRequest,
    GenerationFinished,
    SamplingParams,
)
from jupyter_superfluid.engine.local.kv.slots import Slot
from jupyter_superfluid.engine.local.llama import LlamaEngine
from jupyter_superfluid.engine.local.sequence import Sequence, fill_token_batch


def _sequence(seq_id: int, held: int, pending: list[int]) -> Sequence:
    """A sequence in slot ``seq_id`` holding ``held`` tokens, with ``pending`` to feed."""
    none = cast(Any, None)  # the batch layout reads neither sampler, decoder nor emit
    seq = Sequence(prompt=(), max_tokens=None, sampler=none, decoder=none, emit=none)
    seq.slot = Slot(seq_id, tokens=list(range(held)))
    seq.pending = list(pending)
    return seq


def test_a_batch_is_laid_out_in_sequence_id_order_with_generation_first() -> None:
    generating = [_sequence(5, 40, [11]), _sequence(2, 30, [12]), _sequence(7, 20, [13])]
    prompt_3 = _sequence(3, 0, list(range(100, 110)))  # admitted first: filled first
    prompt_0 = _sequence(0, 4, list(range(200, 210)))
    active = [prompt_3, generating[0], prompt_0, generating[1], generating[2]]
    batch = L.llama_batch_init(16, 0, 1)
    try:
        fed = fill_token_batch(batch, active, n_batch=15)
        n = batch.n_tokens
        seq_ids = [batch.seq_id[i][0] for i in range(n)]
        positions = [batch.pos[i] for i in range(n)]
        logits = [bool(batch.logits[i]) for i in range(n)]
        tokens = [batch.token[i] for i in range(n)]
    finally:
        L.llama_batch_free(batch)
    # Every generating token, the first prompt whole, the second in the 2 cells left.
    assert n == 15
    assert seq_ids == [0, 0, 2, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 5, 7]
    assert tokens == [200, 201, 12, *range(100, 110), 11, 13]
    assert positions == [4, 5, 30, *range(10), 40, 20]
    assert [i for i, wanted in enumerate(logits) if wanted] == [2, 12, 13, 14]
    by_slot = {item.seq.slot.seq_id: item for item in fed if item.seq.slot}
    assert [item.seq.slot.seq_id for item in fed if item.seq.slot] == [0, 2, 3, 5, 7]
    assert {k: (v.count, v.logits_index) for k, v in by_slot.items()} == {
        0: (2, None),
        2: (1, 2),
        3: (10, 12),
        5: (1, 13),
        7: (1, 14),
    }


class _Started:
    """A submitted generation: the slot it ran in (read while it ran) and its end."""

    def __init__(self, engine: LlamaEngine, prompt: list[int], max_tokens: int) -> None:
        self.slot: int | None = None
        self.done = threading.Event()
        (eos,) = engine.tokenize(engine.info.eos_token)  # banned: the first one must run long
        params = SamplingParams(seed=1, max_tokens=max_tokens, logit_bias={eos: -100.0})
        self.seq = engine.prepare(GenerateRequest(tuple(prompt), params), self._emit)
        engine.submit(self.seq)

    def _emit(self, event: EngineEvent) -> bool:
        if self.slot is None and self.seq.slot is not None:
            self.slot = self.seq.slot.seq_id  # on the worker thread, while it runs
        if isinstance(event, GenerationFinished):
            self.done.set()
        return True

    def finished(self) -> bool:
        """Wait for the end."""
        return self.done.wait(60)


def _slots_touched_in_odd_order(engine: LlamaEngine) -> None:
    """Fill slots 0..7 one by one, then continue the odd ones: the even ones are oldest."""
    prompts = [chat_prompt(engine, f"Conversation {k} " * 4) for k in range(8)]
    runs = [generate(engine, p, seed=1, max_tokens=4) for p in prompts]
    for k in (1, 3, 5, 7):
        more = prompts[k] + runs[k].tokens + engine.tokenize(" and on")
        assert generate(engine, more, seed=1, max_tokens=2).prompt.cached_tokens > len(prompts[k])


def test_a_new_sequence_is_placed_beside_the_running_one(sf_make_engine: Any) -> None:
    engine = sf_make_engine(cache_slots=8, context_size=512)
    _slots_touched_in_odd_order(engine)
    first = _Started(engine, chat_prompt(engine, "A new question " * 3), 120)
    second = _Started(engine, chat_prompt(engine, "Another one " * 3), 4)
    assert second.finished() and first.finished()
    assert first.slot is not None and second.slot is not None
    # The least recent idle slots are the even ones: two apart from any odd one.
    assert abs(first.slot - second.slot) == 1


def test_in_a_unified_cache_placement_ignores_adjacency(sf_make_engine: Any) -> None:
    engine = sf_make_engine(cache_slots=8, context_size=512, kv_tokens=UNIFIED)
    _slots_touched_in_odd_order(engine)
    first = _Started(engine, chat_prompt(engine, "A new question " * 3), 120)
    second = _Started(engine, chat_prompt(engine, "Another one " * 3), 4)
    assert second.finished() and first.finished()
    assert first.slot is not None and second.slot is not None
    # Least recently used first: slots 0 and 2, one apart from nothing that runs.
    assert (first.slot, second.slot) == (0, 2)

"""The step loop: one worker thread per model, continuous batching over one context.

Every step builds ONE ``llama_batch`` holding the next token of every sequence
that is generating plus chunks of prompts still being evaluated (up to
``n_batch`` tokens), runs one ``llama_decode`` and samples each sequence that got
logits with its own sampler chain. Running N conversations this way costs
about one forward pass per step instead of N (the weights are read once per
step), and a long prompt never stalls the streams already running. All
llama.cpp context calls happen on this thread, so the context needs no lock;
the event loop only ever enqueues work and reads finished events.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import llama_cpp.llama_cpp as L

from jupyter_superfluid.engine.base import (
    EngineError,
    FinishReason,
    GenerationFinished,
    PromptEvaluated,
    TokenGenerated,
)
from jupyter_superfluid.engine.local.kv.disk_tier import DiskTier
from jupyter_superfluid.engine.local.kv.prefix_cache import PrefixCache
from jupyter_superfluid.engine.local.kv.prefix_index import block_hashes
from jupyter_superfluid.engine.local.kv.state import LlamaMemory, Staged
from jupyter_superfluid.engine.local.native import Vocab
from jupyter_superfluid.engine.local.sequence import (
    Fed,
    Sequence,
    fill_media_batch,
    fill_token_batch,
)

__all__ = ["Sequence", "Worker"]

log = logging.getLogger(__name__)

# Decodes of at least this many tokens time prompt evaluation (for the park policy).
_TIMED_BATCH = 64
# Closing writes kept states to disk for at most this long (an engine process
# is killed if it takes more than 10 s to exit).
CLOSE_FLUSH_S = 5.0
# A due write the disk writer refused (it is behind) is tried again this much later.
FLUSH_RETRY_S = 0.25


class Worker:
    """Owns the context's step loop on a dedicated thread."""

    def __init__(
        self,
        ctx: Any,
        vocab: Vocab,
        *,
        n_slots: int,
        n_batch: int,
        context_size: int,
        name: str,
        park_bytes: int = 0,
        store: DiskTier | None = None,
        n_embd: int = 0,
        media_non_causal: bool = False,
        after_step: Callable[[], None] | None = None,
        write_delay: float = 0.0,
        streams: bool = False,
    ) -> None:
        self._ctx = ctx
        self._write_delay = write_delay
        self._after_step = after_step
        self._vocab = vocab
        self._n_batch = n_batch
        self._context_size = context_size
        self._store = store
        self.cache = PrefixCache(
            n_slots,
            LlamaMemory(ctx, streams=streams),
            kv_cells=L.llama_n_ctx(ctx),
            park_bytes=park_bytes,
            store=store,
            streams=streams,
        )
        self._batch = L.llama_batch_init(n_batch, 0, 1)
        # Media embeddings go through a batch of their own (a batch holds tokens
        # or embeddings, not both); only models with a projector get one.
        self._embd_batch = L.llama_batch_init(n_batch, n_embd, 1) if n_embd else None
        self._n_embd = n_embd
        self._media_non_causal = media_non_causal
        self._cond = threading.Condition()
        self._incoming: list[Sequence] = []
        self._waiting: deque[Sequence] = deque()
        self._active: list[Sequence] = []
        self._stopping = False
        self._unflushed = False  # a finished turn's state may not be on disk yet
        self._flush_at = 0.0  # time.monotonic() when the next write-behind is due
        self._poked = False
        self.prompt_tokens_evaluated = 0
        self.tokens_generated = 0
        self.decode_calls = 0
        self._thread = threading.Thread(target=self._run, name=f"superfluid:{name}", daemon=True)
        self._thread.start()

    def submit(self, seq: Sequence) -> None:
        """Queue a sequence; the loop admits it when a slot is idle."""
        with self._cond:
            if self._stopping:
                raise EngineError("the engine is closed")
            self._incoming.append(seq)
            self._cond.notify()

    def poke(self) -> None:
        """The engine's counters changed off the loop (a disk write): report them (any thread)."""
        with self._cond:
            self._poked = True
            self._cond.notify()

    def stop(self) -> None:
        """Cancel everything, end the loop and free the batch (blocks until done)."""
        with self._cond:
            self._stopping = True
            self._cond.notify()
        if self._thread is not threading.current_thread():
            self._thread.join()

    def _run(self) -> None:
        """The loop: wait for work, step, and never die of one request's failure."""
        try:
            while self._next_round():
                try:
                    self._step()
                except Exception as exc:
                    log.exception("engine step failed")
                    for seq in list(self._active):
                        self._finish(seq, "error", error=f"{type(exc).__name__}: {exc}", clear=True)
                if self._after_step is not None:
                    self._after_step()
        finally:
            for seq in [*self._active, *self._waiting, *self._incoming]:
                self._finish(seq, "cancelled")
            if self._after_step is not None:
                self._after_step()
            self._flush_all()
            L.llama_batch_free(self._batch)
            if self._embd_batch is not None:
                L.llama_batch_free(self._embd_batch)

    def _next_round(self) -> bool:
        """Block until there is work; idle, write kept turns to disk. False once stopping."""
        while True:
            with self._cond:
                fresh = list(self._incoming)
                self._waiting.extend(fresh)
                self._incoming.clear()
                if self._stopping:
                    return False
                poked, self._poked = self._poked, False
                due = self._unflushed and time.monotonic() >= self._flush_at
                if not (fresh or poked or due or self._ready()):
                    wait = self._flush_at - time.monotonic() if self._unflushed else None
                    self._cond.wait(wait)
                    continue
            if fresh:
                self._stage(fresh)
            if self._ready() or poked:
                return True  # a poke: a step with nothing to run, then after_step reports
            if not fresh and due:
                self._write_behind()

    def _write_behind(self) -> None:
        """Idle: write one kept state idle for the delay; schedule the next one."""
        if self.cache.flush_one(idle_for=self._write_delay):
            return  # more may be due at once
        due, now = self.cache.next_flush(self._write_delay), time.monotonic()
        self._unflushed = due is not None
        if due is not None:  # not idle long enough yet, or refused (the writer is behind)
            self._flush_at = due if due > now else now + FLUSH_RETRY_S

    def _ready(self) -> bool:
        """Whether a step has something to run (sequences waiting on disk reads do not)."""
        return bool(self._active) or any(not s.staging for s in self._waiting)

    def _stage(self, fresh: list[Sequence]) -> None:
        """Start reading from disk the cached prefixes that beat what memory holds."""
        if self._store is None:
            return
        for seq in fresh:
            seq.hashes = block_hashes(seq.prompt)
            tokens, lcp = self._store.best(seq.prompt, seq.hashes)
            gain = min(lcp, len(seq.prompt) - 1) - self.cache.memory_match(seq.prompt, seq.hashes)
            if not self.cache.costs.restore_pays(gain, len(tokens), disk=True):
                continue
            seq.staging = True
            self._store.read(tokens, functools.partial(self._staged, seq))

    def _staged(self, seq: Sequence, staged: Staged | None) -> None:
        """A disk read finished (on the reader thread): the sequence may be admitted."""
        with self._cond:
            seq.staged = staged
            seq.staging = False
            self._cond.notify()

    def _flush_all(self) -> None:
        """Closing: hand the disk every kept state it does not hold yet, for a few seconds."""
        if self._store is None:
            return
        deadline = time.monotonic() + CLOSE_FLUSH_S
        try:
            while (left := deadline - time.monotonic()) > 0 and self.cache.flush_one(wait=left):
                pass
        except Exception:  # closing goes on whatever the disk does
            log.exception("writing kept KV state at close failed")

    def _step(self) -> None:
        """Admit, decode one batch, sample."""
        for seq in [s for s in (*self._active, *self._waiting) if s.cancelled and not s.closing]:
            self._finish(seq, "cancelled")
        closing = {s.slot.seq_id for s in self._active if s.closing and s.slot is not None}
        admitted = False
        for seq in [s for s in self._waiting if not s.staging]:
            if not self.cache.has_idle():
                break
            # A turn that continues a conversation still being closed waits one
            # step, then finds its whole history in place.
            if closing:
                slot, reusable, _ = self.cache.best_match(seq.prompt)
                if reusable and slot.seq_id in closing:
                    break
            self._waiting.remove(seq)
            self._admit(seq)
            admitted = True
        if admitted:
            # Idle conversations' cells would be attended over by every running
            # token; move them to host memory when they are in the way (the
            # cache decides), unless a waiting prompt needs them.
            running = sum(len(s.prompt) for s in self._active)
            self.cache.park_idle(self._protected(), pressed=self._pressed(), running_cells=running)
        if not self._active:
            return
        fed = self._fill_batch()
        media = [s for s in self._active if s.pending and s.pending[0] < 0 and not s.closing]
        if fed and self._decode(fed, self._batch):
            self._sample(fed)
        for seq in media:
            if seq in self._active:
                self._feed_media(seq)

    def _feed_media(self, seq: Sequence) -> None:
        """Decode the media run at the head of ``seq``'s pending tokens, then sample if done."""
        assert self._embd_batch is not None
        fed, whole = fill_media_batch(self._embd_batch, seq, self._n_batch)
        # Some projectors (e.g. Gemma 3) want a medium's positions to see each other.
        non_causal = self._media_non_causal and whole
        if non_causal:
            L.llama_set_causal_attn(self._ctx, False)
        try:
            decoded = self._decode(fed, self._embd_batch)
        finally:
            if non_causal:
                L.llama_set_causal_attn(self._ctx, True)
        if decoded:
            self._sample(fed)

    def _admit(self, seq: Sequence) -> None:
        """Give a sequence its slot and reuse the cached prefix."""
        placement = self.cache.place(
            seq.prompt, self._protected(), retain=seq.retain, hashes=seq.hashes, staged=seq.staged
        )
        seq.staged = None  # used or not, the copy read from disk is done with
        assert placement is not None  # has_idle() was checked
        seq.slot, seq.cached = placement.slot, placement.reused
        seq.pending = list(seq.prompt[placement.reused :])
        self._active.append(seq)

    def _pressed(self) -> bool:
        """Whether cells are short for what is running, or sequences wait for a slot."""
        need = sum(
            len(s.pending) + (s.max_tokens or self._context_size - len(s.prompt))
            for s in self._active
        )
        if self._waiting:
            return True
        return not self.cache.streams and self.cache.kv_cells - self.cache.resident_cells() < need

    def _protected(self) -> frozenset[int]:
        """Slots holding the cache hits of the sequences queued next."""
        return frozenset(
            slot.seq_id
            for other in list(self._waiting)[: len(self.cache.slots)]
            for slot, reusable, _ in [self.cache.best_match(other.prompt)]
            if reusable
        )

    def _fill_batch(self) -> list[Fed]:
        """Put every generating sequence's next token, then prompt chunks, into the batch."""
        return fill_token_batch(self._batch, self._active, self._n_batch)

    def _decode(self, fed: list[Fed], batch: Any) -> bool:
        """Run the batch; on a full KV cache evict idle slots (LRU) and retry."""
        while True:
            started = time.perf_counter()
            rc = L.llama_decode(self._ctx, batch)
            self.decode_calls += 1
            if rc == 0:
                if batch.n_tokens >= _TIMED_BATCH:  # mostly prompt: what evaluating costs
                    self.cache.costs.note_eval(batch.n_tokens, time.perf_counter() - started)
                return True
            # A full unified cache has room once idle slots go; a stream is one slot's own.
            if rc == 1 and not self.cache.streams and self.cache.evict_one():
                continue
            if rc == 1:
                # Nothing idle left to evict: the running sequences alone do not
                # fit. Fail the newest admitted (the batch is in sequence-id order);
                # the next step rebuilds the batch without it.
                victim = max((item.seq for item in fed), key=self._active.index)
                self._finish(victim, "error", error="KV cache full", clear=True)
                return False
            # A fatal decode error leaves the KV state of this batch unknown.
            for item in fed:
                self._finish(item.seq, "error", error=f"llama_decode returned {rc}", clear=True)
            return False

    def _sample(self, fed: list[Fed]) -> None:
        """Record what the KV now holds, then sample every sequence that got logits."""
        for item in fed:
            seq = item.seq
            assert seq.slot is not None
            seq.slot.tokens.extend(seq.pending[: item.count])
            del seq.pending[: item.count]
            if seq.closing and not seq.pending:
                self._finish(seq, "stop")  # only releases the slot: the end was sent
                continue
            if seq.completion == 0:
                self.prompt_tokens_evaluated += item.count
            if item.logits_index is None:
                continue
            self._announce(seq)
            if seq.cancelled:
                self._finish(seq, "cancelled")
                continue
            token = seq.sampler.sample(self._ctx, item.logits_index)
            self.tokens_generated += 1
            seq.completion += 1
            reason = self._stop_reason(seq, token)
            text = seq.decoder.feed(token, final=reason is not None)
            if not seq.emit(TokenGenerated(token, text)):
                seq.cancel()
            if reason == "stop" and seq.suffix:
                self._close_turn(seq, token)
            elif reason is not None:
                self._finish(seq, reason)
            else:
                seq.pending = [token]

    def _close_turn(self, seq: Sequence, token: int) -> None:
        """Send the end now; feed the final token and the suffix into the cache next."""
        assert seq.slot is not None
        room = self._context_size - len(seq.slot.tokens)
        seq.pending = [token, *seq.suffix][:room]
        seq.closing = True
        seq.sampler.free()
        seq.finished = True
        seq.emit(GenerationFinished("stop", seq.completion))

    def _stop_reason(self, seq: Sequence, token: int) -> FinishReason | None:
        """Why the sequence ends with ``token``, or None to go on."""
        if self._vocab.is_eog(token):
            return "stop"
        if seq.max_tokens is not None and seq.completion >= seq.max_tokens:
            return "length"
        assert seq.slot is not None
        if len(seq.slot.tokens) + 1 >= self._context_size:
            return "length"  # the conversation fills its window
        return None

    def _announce(self, seq: Sequence) -> None:
        """Send PromptEvaluated once."""
        if not seq.announced:
            seq.announced = True
            seq.emit(PromptEvaluated(len(seq.prompt), seq.cached))

    def _finish(
        self, seq: Sequence, reason: FinishReason, *, error: str | None = None, clear: bool = False
    ) -> None:
        """End a sequence: free its sampler, release its slot, send the last event."""
        if seq in self._active:
            self._active.remove(seq)
        elif seq in self._waiting:
            self._waiting.remove(seq)
        if seq.slot is not None:
            if clear:
                self.cache.clear(seq.slot)
            self.cache.release(seq.slot)
            if self._store is not None:  # written once the engine has been idle a while
                self._unflushed, self._flush_at = True, time.monotonic() + self._write_delay
            seq.slot = None
        seq.sampler.free()
        if not seq.finished:
            seq.finished = True
            self._announce(seq)
            seq.emit(GenerationFinished(reason, seq.completion, error))

"""``LlamaEngine``: the Engine protocol on llama-cpp-python's low-level API.

Why it looks like this:

- ``llama_cpp.Llama`` keeps one sequence per context, so several conversations
  would each need a context (and a KV cache) of their own. This engine builds
  one context with ``n_seq_max = cache_slots`` (``native.create_context``): by
  default each sequence has a KV stream of one window to itself, as
  ``llama-server -np N`` does, so what idle conversations hold costs the running
  ones nothing and a fork copies the shared prefix once; with ``kv_tokens`` one
  unified cache of that many cells, where a fork only tags cells but every
  token attends over every used cell.
- One worker thread per model runs a step loop (``worker.py``) that batches the
  next token of every active request into one ``llama_decode`` (continuous
  batching). The event loop never waits on llama.cpp: ``generate()`` returns an
  async iterator fed from the worker through ``loop.call_soon_threadsafe`` into
  an ``asyncio.Queue``; tokenizing is fast and runs inline.
- The KV cells each sequence holds are tracked as token ids (``kv/prefix_cache.py``), so
  a prompt that continues or branches any recent conversation reuses its
  longest cached prefix, and ``PromptEvaluated.cached_tokens`` is measured.
- Kept conversations move to host memory and disk (``kv/``) when their slot is
  needed, or, in a unified cache, when they are in the running ones' way.
- Closing the iterator sets a flag the worker checks every step, so a
  disconnected client costs at most one more token; the slot's KV stays cached.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import threading
import time
import weakref
from collections.abc import AsyncGenerator, Callable
from collections.abc import Sequence as Seq
from pathlib import Path
from typing import Any

import llama_cpp.llama_cpp as L

from jupyter_superfluid.engine.base import (
    MEDIA_MARKER,
    ContextOverflowError,
    EngineError,
    EngineEvent,
    GenerateRequest,
    GenerationFinished,
    MediaError,
    MediaTokens,
    ModelInfo,
)
from jupyter_superfluid.engine.local.kv.disk_tier import DiskTier
from jupyter_superfluid.engine.local.loading import disk_tier, load_projector, model_info
from jupyter_superfluid.engine.local.media import MediaPiece, MediaProjector, MediaStore
from jupyter_superfluid.engine.local.native import (
    Vocab,
    create_context,
    default_threads,
    load_model,
)
from jupyter_superfluid.engine.local.sampling import TextDecoder, build_sampler
from jupyter_superfluid.engine.local.worker import Sequence, Worker

log = logging.getLogger(__name__)

# Engines still open at interpreter exit are closed first, so no worker thread
# is inside llama.cpp while the interpreter tears down.
_open_engines: weakref.WeakSet[LlamaEngine] = weakref.WeakSet()


@atexit.register
def _close_open_engines() -> None:
    """Close what is still open (atexit)."""
    for engine in list(_open_engines):
        engine.close_sync()


class LlamaEngine:
    """A loaded GGUF model serving concurrent generations with a prefix cache."""

    def __init__(
        self,
        info: ModelInfo,
        model: Any,
        ctx: Any,
        vocab: Vocab,
        worker: Worker,
        projector: MediaProjector | None = None,
        store: DiskTier | None = None,
    ) -> None:
        self._info = info
        self._store = store
        self._projector = projector
        self._model = model
        self._ctx = ctx
        self._vocab = vocab
        self._worker = worker
        self._media = MediaStore()
        self._closed = False
        self._close_lock = threading.Lock()
        _open_engines.add(self)

    @classmethod
    def load(
        cls,
        model_id: str,
        path: str | Path,
        *,
        context_size: int = 4096,
        threads: int | None = None,
        gpu_layers: int = 0,
        cache_slots: int = 8,
        kv_tokens: int | None = None,
        batch_size: int = 512,
        flash_attention: bool | None = False,
        park_mib: int = 2048,
        mmproj: str | Path | None = None,
        after_step: Callable[[], None] | None = None,
        on_counters: Callable[[], None] | None = None,
        kv_dir: str | Path | None = None,
        disk_mib: int = 4096,
        kv_write_delay: float = 2.0,
    ) -> LlamaEngine:
        """Load ``path`` (blocking; run it in a thread). Raises ModelLoadError.

        ``context_size`` is each conversation's window (capped at the model's training
        context); ``kv_tokens`` None gives each slot a KV stream of one window
        (``cache_slots`` x ``context_size`` cells), a number one unified cache of that many
        cells all slots share (``native.create_context``); ``park_mib`` the host memory for
        idle conversations' KV state (``kv/prefix_cache.py``; 0: evict instead);
        ``flash_attention`` trades exactness for memory (see ``native.create_context``);
        ``mmproj`` a multimodal projector GGUF for image/audio input (``media.py``);
        ``after_step`` runs on the worker thread after every step (an engine process sends
        each step's events in one message from there), and ``on_counters`` (any thread) when
        ``stats()`` changed between steps; ``kv_dir`` the directory of the disk tier
        (``kv/disk_tier.py``; None: no disk tier), bounded by ``disk_mib``; kept states are
        written once the engine has been idle ``kv_write_delay`` seconds (and at close).
        """
        started = time.monotonic()
        path = Path(path)
        model = load_model(path, gpu_layers=gpu_layers)
        ctx = projector = store = None
        try:
            vocab = Vocab(model)
            context_size = min(context_size, L.llama_model_n_ctx_train(model))
            streams = not kv_tokens  # a budget given: one unified cache of that many cells
            ctx = create_context(
                model,
                n_ctx=cache_slots * context_size if streams else max(kv_tokens or 0, context_size),
                n_seq_max=cache_slots,
                n_batch=batch_size,
                threads=threads or default_threads(),
                flash_attention=flash_attention,
                unified=not streams,
            )
            projector = load_projector(mmproj, model, threads) if mmproj else None
            info = model_info(model_id, path, model, vocab, context_size, projector)
            # llama.cpp clamps n_batch to n_ctx (and aborts on a larger batch).
            n_batch = L.llama_n_batch(ctx)
            if kv_dir is not None and disk_mib > 0:
                store = disk_tier(
                    *(Path(kv_dir), model_id, path, model, flash_attention, mmproj),
                    disk_mib << 20,
                    kv_streams=cache_slots if streams else 1,  # a saved state lists each
                )
            worker = Worker(
                ctx,
                vocab,
                n_slots=cache_slots,
                n_batch=n_batch,
                context_size=context_size,
                name=model_id,
                park_bytes=park_mib << 20,
                store=store,
                n_embd=projector.n_embd if projector else 0,
                media_non_causal=bool(projector and projector.uses_non_causal),
                after_step=after_step,
                write_delay=kv_write_delay,
                streams=streams,
            )
        except BaseException:
            _free(model, ctx, projector, store)
            raise
        log.info(
            "loaded %s from %s in %.2fs (window %d, %d slots, %d KV cells, %s)",
            *(model_id, path, time.monotonic() - started, context_size, cache_slots),
            L.llama_n_ctx(ctx),
            "a stream per slot" if streams else "one unified cache",
        )
        if store is not None:  # what the disk holds shows in stats() at once
            store.on_change = _counters_moved(worker, on_counters)
        return cls(info, model, ctx, vocab, worker, projector, store)

    @property
    def info(self) -> ModelInfo:
        """The model's metadata."""
        return self._info

    @property
    def prompt_tokens_evaluated(self) -> int:
        """Prompt tokens run through the model since load (cache hits excluded)."""
        return self._worker.prompt_tokens_evaluated

    @property
    def tokens_generated(self) -> int:
        """Tokens sampled since load (including ones dropped by a cancellation)."""
        return self._worker.tokens_generated

    def stats(self) -> dict[str, object]:
        """Counters and what each KV tier holds (the models endpoint shows them)."""
        return {
            "prompt_tokens_evaluated": self._worker.prompt_tokens_evaluated,
            "tokens_generated": self._worker.tokens_generated,
            "decode_calls": self._worker.decode_calls,
            **self._worker.cache.stats(),
            **(self._store.stats() if self._store is not None else {}),
        }

    def tokenize(self, text: str, *, special: bool = True) -> list[int]:
        """Token ids of ``text`` (BOS only if the model asks for it)."""
        self._check_open()
        return self._vocab.tokenize(text, add_special=self._vocab.add_bos, parse_special=special)

    def detokenize(self, tokens: list[int]) -> str:
        """Text of ``tokens``, control tokens rendered."""
        self._check_open()
        return self._vocab.detokenize(tokens)

    def tokenize_media(self, text: str, media: Seq[bytes]) -> MediaTokens:
        """Tokens of ``text`` with one MEDIA_MARKER per medium, encoded here (blocking).

        The embeddings stay in this engine; the result names them by key.
        """
        self._check_open()
        if self._projector is None:
            raise MediaError("this model takes no images or audio")
        if self._projector.marker != MEDIA_MARKER:
            text = text.replace(MEDIA_MARKER, self._projector.marker)
        return self._media.add(self._projector.tokenize(text, media))

    def _check_open(self) -> None:
        """Refuse calls that would touch the freed model."""
        if self._closed:
            raise EngineError("the engine is closed")

    def generate(self, request: GenerateRequest) -> AsyncGenerator[EngineEvent, None]:
        """Stream PromptEvaluated, TokenGenerated*, GenerationFinished.

        Raises at once (before evaluating anything): ContextOverflowError when
        the prompt leaves no room for one token, EngineError for an empty
        prompt, an unknown token id, ``max_tokens`` < 1, an invalid grammar,
        media the engine no longer holds or a closed engine.

        ``cache_suffix``: the tokens that follow an end-of-generation token in
        the stored conversation (e.g. the ``\n`` after ``<|im_end|>``). When the
        generation stops on such a token, the engine feeds it and the suffix
        into the cache right after sending GenerationFinished, so the next turn
        is served from cache throughout.
        """
        relay = _Relay()
        return self._stream(self.prepare(request, relay.emit), relay)

    def prepare(self, request: GenerateRequest, emit: Callable[[EngineEvent], bool]) -> Sequence:
        """Check ``request``; the sequence to ``submit``, whose events go to ``emit``.

        Raises as ``generate`` does. ``emit`` is called on the worker thread and
        returns False once nobody listens (the generation then stops);
        ``Sequence.cancel()`` stops it from any thread.
        """
        self._check_open()
        prompt = request.prompt_tokens
        if not prompt:
            raise EngineError("empty prompt")
        if len(prompt) + 1 > self._info.context_size:
            raise ContextOverflowError(
                f"prompt of {len(prompt)} tokens leaves no room in a "
                f"{self._info.context_size}-token context",
                prompt_tokens=len(prompt),
                context_size=self._info.context_size,
            )
        if request.sampling.max_tokens is not None and request.sampling.max_tokens < 1:
            raise EngineError("max_tokens must be at least 1")
        suffix = tuple(request.cache_suffix)
        media = _media_spans(prompt, tuple(self._media.get(ref) for ref in request.media))
        n_vocab = self._vocab.n_tokens
        if any(not 0 <= t < n_vocab for t in (*prompt, *suffix) if not t < 0 or not media):
            raise EngineError(f"token ids outside the vocabulary (0..{n_vocab - 1})")
        return Sequence(
            prompt=tuple(prompt),
            max_tokens=request.sampling.max_tokens,
            sampler=build_sampler(self._vocab, request.sampling),
            decoder=TextDecoder(self._vocab),
            emit=emit,
            suffix=suffix,
            media=media,
            retain=request.retain,
        )

    def submit(self, seq: Sequence) -> None:
        """Queue a prepared sequence on the worker (EngineError once closed)."""
        try:
            self._worker.submit(seq)
        except BaseException:
            seq.sampler.free()
            raise

    async def _stream(self, seq: Sequence, relay: _Relay) -> AsyncGenerator[EngineEvent, None]:
        """Submit, then relay the worker's events; closing cancels."""
        relay.loop = asyncio.get_running_loop()
        try:
            self.submit(seq)
            while True:
                event = await relay.queue.get()
                yield event
                if isinstance(event, GenerationFinished):
                    return
        finally:
            seq.cancel()  # a no-op once finished; otherwise stops before the next token

    async def close(self) -> None:
        """Cancel running generations, stop the worker and free the model."""
        await asyncio.to_thread(self.close_sync)

    def close_sync(self) -> None:
        """Blocking ``close()`` (idempotent, thread-safe)."""
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        self._worker.stop()  # writes what the disk tier does not hold yet
        _free(self._model, self._ctx, self._projector, self._store)
        log.info("closed %s", self._info.id)


def _free(model: Any, ctx: Any, projector: MediaProjector | None, store: DiskTier | None) -> None:
    """Free what a load set up (``ctx`` None: it failed before the context), the model last."""
    if store is not None:
        store.close()
    if projector is not None:
        projector.close()
    if ctx is not None:
        L.llama_free(ctx)
    L.llama_model_free(model)


def _counters_moved(worker: Worker, then: Callable[[], None] | None) -> Callable[[], None]:
    """What to call when the counters change off the token loop: ``then``, and wake the loop.

    The loop runs an empty step, so ``after_step`` reports them.
    """

    def moved() -> None:
        if then is not None:
            then()
        worker.poke()

    return moved


class _Relay:
    """Carries a generation's events from the worker thread to the consuming loop."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[EngineEvent] = asyncio.Queue()
        self.loop: asyncio.AbstractEventLoop | None = None  # set before the worker runs it

    def emit(self, event: EngineEvent) -> bool:
        """Hand an event to the loop (from the worker thread); False if it is gone."""
        assert self.loop is not None
        try:
            self.loop.call_soon_threadsafe(self.queue.put_nowait, event)
        except RuntimeError:  # the loop is closed: nobody is listening
            return False
        return True


def _media_spans(
    prompt: tuple[int, ...], media: tuple[MediaPiece, ...]
) -> tuple[tuple[int, MediaPiece], ...]:
    """Where each medium's placeholder run starts in ``prompt``; EngineError if they disagree."""
    spans: list[tuple[int, MediaPiece]] = []
    i = 0
    for piece in media:
        while i < len(prompt) and prompt[i] >= 0:
            i += 1
        run = prompt[i : i + piece.n_pos]
        if len(run) != piece.n_pos or any(t != piece.placeholder_id for t in run):
            raise EngineError("the prompt's media placeholders do not match its media")
        spans.append((i, piece))
        i += piece.n_pos
    if any(t < 0 for t in prompt[i:]):
        raise EngineError("the prompt has media placeholders without media")
    return tuple(spans)

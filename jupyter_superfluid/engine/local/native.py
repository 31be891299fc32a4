"""Thin, typed wrappers over llama-cpp-python's low-level (ctypes) API.

Only what the engine needs: llama.cpp's log routed into a ring buffer (so it
stays quiet on stderr, yet a failed load can quote llama.cpp's own reason),
model and context creation, vocabulary helpers and GGUF metadata.
"""

from __future__ import annotations

import ctypes
import hashlib
import itertools
import logging
import os
import threading
from collections import deque
from pathlib import Path
from typing import Any

import llama_cpp.llama_cpp as L

from jupyter_superfluid.engine.base import EngineError, ModelLoadError

log = logging.getLogger(__name__)

# ggml_log_level: NONE 0, DEBUG 1, INFO 2, WARN 3, ERROR 4, CONT 5 (continues a line).
_LEVEL_WARN = 3
_LEVEL_ERROR = 4
_LEVEL_CONT = 5
_log_counter = itertools.count(1)
# (sequence number, level, text); appends from any thread are atomic.
_log_lines: deque[tuple[int, int, str]] = deque(maxlen=400)
_log_state = {"last_level": 0, "echo": False}
_init_lock = threading.Lock()
_initialized = False


@L.llama_log_callback  # type: ignore[untyped-decorator,misc]
def _on_log(level: int, text: bytes, user_data: ctypes.c_void_p) -> None:
    """Keep llama.cpp's log lines in memory instead of printing them."""
    if level == _LEVEL_CONT:
        level = _log_state["last_level"]
    _log_state["last_level"] = level
    line = text.decode("utf-8", errors="replace")
    _log_lines.append((next(_log_counter), level, line))
    if level == _LEVEL_ERROR:
        log.warning("llama.cpp: %s", line.rstrip())
    elif _log_state["echo"]:
        log.debug("llama.cpp: %s", line.rstrip())


def init_backend(*, verbose: bool | None = None) -> None:
    """Initialise llama.cpp once and capture its log (echoed when verbose)."""
    global _initialized
    if verbose is None:
        verbose = os.environ.get("SUPERFLUID_LLAMA_VERBOSE", "") not in ("", "0")
    _log_state["echo"] = verbose
    with _init_lock:
        if _initialized:
            return
        # llama_cpp's own import installs a stderr logger; replace it.
        L.llama_log_set(_on_log, ctypes.c_void_p(0))
        L.llama_backend_init()
        _initialized = True


def log_mark() -> int:
    """A position in the captured log; pass it to ``log_errors_since``."""
    return _log_lines[-1][0] if _log_lines else 0


def log_errors_since(mark: int, *, limit: int = 5) -> list[str]:
    """Error lines llama.cpp logged after ``mark`` (warnings if there are none)."""
    recent = [(lvl, t.strip()) for n, lvl, t in list(_log_lines) if n > mark and t.strip()]
    lines = [t for lvl, t in recent if lvl == _LEVEL_ERROR]
    lines = lines or [t for lvl, t in recent if lvl == _LEVEL_WARN]
    return lines[:limit]


def _check_gguf_file(path: Path) -> None:
    """Explain the common load failures before llama.cpp sees the file."""
    if not path.exists():
        raise ModelLoadError(f"cannot load model {path}: file not found")
    if not path.is_file():
        raise ModelLoadError(f"cannot load model {path}: not a regular file")
    try:
        with path.open("rb") as f:
            magic = f.read(4)
    except OSError as exc:
        raise ModelLoadError(f"cannot load model {path}: {exc}") from exc
    if magic != b"GGUF":
        raise ModelLoadError(f"cannot load model {path}: not a GGUF file (bad magic {magic!r})")


def load_model(path: Path, *, gpu_layers: int = 0, vocab_only: bool = False) -> Any:
    """Load a GGUF model (a ``llama_model*``) or raise ModelLoadError with the cause.

    ``vocab_only`` reads the metadata and vocabulary, no weights (milliseconds, a few MiB).
    """
    init_backend()
    _check_gguf_file(path)
    params = L.llama_model_default_params()
    params.n_gpu_layers = gpu_layers
    params.vocab_only = vocab_only
    mark = log_mark()
    model = L.llama_model_load_from_file(str(path).encode(), params)
    if not model:
        detail = "; ".join(log_errors_since(mark)) or "llama.cpp gave no reason"
        raise ModelLoadError(f"cannot load model {path}: {detail}")
    return model


# Without flash attention llama.cpp materialises n_ubatch x n_kv attention
# scores per head; keep that product bounded so a large KV cache does not
# reserve gigabytes of compute buffer (prefill just runs in smaller chunks).
_UBATCH_X_KV_BUDGET = 2**21


def _ubatch_size(n_batch: int, n_ctx: int, flash_attention: bool | None) -> int:
    """Physical batch size: up to 512, smaller for big caches without flash attention."""
    size = min(n_batch, 512)
    if flash_attention is False:
        while size > 32 and size * n_ctx > _UBATCH_X_KV_BUDGET:
            size //= 2
    return size


def create_context(
    model: Any,
    *,
    n_ctx: int,
    n_seq_max: int,
    n_batch: int,
    threads: int,
    flash_attention: bool | None = False,
    unified: bool = False,
) -> Any:
    """A multi-sequence context: one KV stream per sequence, or one ``unified`` cache.

    With a stream per sequence (llama-server's layout with an explicit ``-np``)
    each sequence has ``n_ctx / n_seq_max`` cells of its own and attends over
    only those, so what idle sequences hold costs the running ones nothing; a
    fork copies the source's stream once. In one unified cache every sequence
    may use any cell and a fork only tags shared cells, but every token attends
    over every used cell.

    Flash attention is off by default: llama.cpp's CPU flash-attention kernel
    sums a sequence's KV cells in cell order with enough rounding (~1e-3 on
    logits) that a seeded generation could change with where its cells sit in
    the shared cache; the plain path is exact to ~1e-6, so a seed fixes the
    output whatever else the cache holds.
    """
    params = L.llama_context_default_params()
    params.n_ctx = n_ctx
    params.n_seq_max = n_seq_max
    params.n_batch = n_batch
    # A sequence attends over at most its stream's cells (all of them, unified).
    per_sequence = n_ctx if unified else n_ctx // n_seq_max
    params.n_ubatch = _ubatch_size(n_batch, per_sequence, flash_attention)
    params.n_threads = threads
    params.n_threads_batch = threads
    params.kv_unified = unified
    params.no_perf = True
    params.flash_attn_type = {
        None: L.LLAMA_FLASH_ATTN_TYPE_AUTO,
        True: L.LLAMA_FLASH_ATTN_TYPE_ENABLED,
        False: L.LLAMA_FLASH_ATTN_TYPE_DISABLED,
    }[flash_attention]
    mark = log_mark()
    ctx = L.llama_init_from_model(model, params)
    if not ctx:
        detail = "; ".join(log_errors_since(mark)) or "llama.cpp gave no reason"
        raise ModelLoadError(f"cannot create a context (n_ctx={n_ctx}): {detail}")
    return ctx


class Vocab:
    """Tokenizer helpers bound to one model's vocabulary (thread-safe, read-only)."""

    def __init__(self, model: Any) -> None:
        self.ptr = L.llama_model_get_vocab(model)
        self.n_tokens: int = L.llama_vocab_n_tokens(self.ptr)
        self.add_bos: bool = bool(L.llama_vocab_get_add_bos(self.ptr))
        self.bos: int = L.llama_vocab_bos(self.ptr)
        self.eos: int = L.llama_vocab_eos(self.ptr)
        self.eog_ids = tuple(i for i in range(self.n_tokens) if L.llama_vocab_is_eog(self.ptr, i))
        self._eog = frozenset(self.eog_ids)
        pre, suf = L.llama_vocab_fim_pre(self.ptr), L.llama_vocab_fim_suf(self.ptr)
        fim = (int(pre), int(suf), int(L.llama_vocab_fim_mid(self.ptr)))
        # The metadata's ids, or those llama.cpp found by their known spellings.
        self.fim: tuple[int, int, int] | None = fim if min(fim) >= 0 else None
        # Rendered pieces by token: asked once per generated token on the worker's
        # step, where a ctypes call and a fresh buffer cost more than the lookup.
        # Bounded by the vocabulary, and filled only by the tokens actually seen.
        self._pieces: dict[int, bytes] = {}

    def is_eog(self, token: int) -> bool:
        """Whether ``token`` ends a generation."""
        return token in self._eog

    def tokenize(self, text: str, *, add_special: bool, parse_special: bool) -> list[int]:
        """Token ids of ``text``."""
        data = text.encode("utf-8")
        size = len(data) + 8
        for _ in range(2):
            buf = (L.llama_token * size)()
            n = L.llama_tokenize(self.ptr, data, len(data), buf, size, add_special, parse_special)
            if n >= 0:
                return list(buf[:n])
            size = -n
        raise RuntimeError(f"tokenization failed for {len(data)} bytes")

    def piece(self, token: int, *, special: bool = True) -> bytes:
        """The bytes of one token (control tokens rendered when ``special``)."""
        if special and (known := self._pieces.get(token)) is not None:
            return known
        size = 64
        for _ in range(2):
            buf = ctypes.create_string_buffer(size)
            n = L.llama_token_to_piece(self.ptr, token, buf, size, 0, special)
            if n >= 0:
                data = buf.raw[:n]
                if special:
                    self._pieces[token] = data
                return data
            size = -n
        raise RuntimeError(f"cannot render token {token}")

    def detokenize(self, tokens: list[int]) -> str:
        """Text of ``tokens`` with control tokens rendered; bad UTF-8 → U+FFFD."""
        return b"".join(self.piece(t) for t in tokens).decode("utf-8", errors="replace")

    def control_spellings(self) -> list[str]:
        """The spellings of the control and user-defined tokens, in id order."""
        marked = L.LLAMA_TOKEN_ATTR_CONTROL | L.LLAMA_TOKEN_ATTR_USER_DEFINED
        return [
            self.piece(i).decode("utf-8", errors="replace")
            for i in range(self.n_tokens)
            if L.llama_vocab_get_attr(self.ptr, i) & marked
        ]


class VocabFile(Vocab):
    """The vocabulary of a GGUF loaded on its own (no weights), freed by ``free``.

    Tokenizing and freeing hold one lock, so a free never pulls the vocabulary from under
    a tokenize in another thread; a tokenize after the free raises EngineError.
    """

    def __init__(self, model: Any) -> None:
        super().__init__(model)
        self._model = model
        self._lock = threading.Lock()

    def tokenize(self, text: str, *, add_special: bool, parse_special: bool) -> list[int]:
        """Token ids of ``text``; EngineError once freed."""
        with self._lock:
            if self._model is None:
                raise EngineError("the vocabulary is closed")
            return super().tokenize(text, add_special=add_special, parse_special=parse_special)

    def free(self) -> None:
        """Free the vocabulary-only model; the vocabulary is unusable after."""
        with self._lock:
            if self._model is not None:
                L.llama_model_free(self._model)
                self._model = None


def load_vocab(path: Path) -> VocabFile:
    """The vocabulary of the GGUF at ``path`` (ModelLoadError with the cause if unreadable)."""
    return VocabFile(load_model(path, vocab_only=True))


def meta_string(model: Any, key: str) -> str | None:
    """A GGUF metadata value as a string, or None when absent."""
    size = 4096
    for _ in range(2):
        buf = ctypes.create_string_buffer(size)
        n = L.llama_model_meta_val_str(model, key.encode(), buf, size)
        if n < 0:
            return None
        if n < size:
            return buf.value.decode("utf-8", errors="replace")
        size = n + 1
    return None


def metadata_digest(model: Any) -> str:
    """A digest of the model's GGUF metadata, every key and value as llama.cpp renders them."""
    h = hashlib.sha256()
    for i in range(L.llama_model_meta_count(model)):
        for getter in (L.llama_model_meta_key_by_index, L.llama_model_meta_val_str_by_index):
            h.update(_meta_at(getter, model, i) + b"\0")
    h.update(f"{L.llama_model_n_params(model)}:{L.llama_model_size(model)}".encode())
    return h.hexdigest()


def _meta_at(getter: Any, model: Any, i: int) -> bytes:
    """One metadata key or value by index (``getter`` says which)."""
    size = 256
    for _ in range(2):
        buf = ctypes.create_string_buffer(size)
        n = getter(model, i, buf, size)
        if n < 0:
            return b""
        if n < size:
            return buf.value
        size = n + 1
    return buf.value


def default_threads() -> int:
    """Threads for decoding: the usable CPUs, at most 8."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 4
    return max(1, min(cpus, 8))

"""Images and audio as prompt input: a typed wrapper over llama.cpp's ``mtmd``.

A multimodal projector ("mmproj" GGUF) is loaded next to the text model.
``MediaProjector.tokenize`` takes a prompt text in which each medium stands as
the projector's marker (normally ``<__media__>``) plus the media files' bytes,
and returns a ``MediaPrompt``: runs of text token ids and blocks of media
embeddings (one row per position, the text model's input width), ready to be
decoded with a token batch and an embedding batch respectively.

Media bytes are decoded by mtmd's helper (stb_image for PNG/JPEG/GIF/BMP,
miniaudio for WAV/MP3/FLAC, resampled to the projector's rate). Bytes are
sniffed first, so arbitrary data never reaches the helper's video fallback
(which would start ffprobe).

One mtmd context is not safe to use from two threads at once (the encoder
keeps its output inside the context); ``tokenize`` holds a lock throughout.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import llama_cpp.llama_cpp as L
import llama_cpp.mtmd_cpp as M
import numpy as np

from jupyter_superfluid.engine.base import (
    EngineError,
    MediaError,
    MediaRef,
    MediaTokens,
    ModelLoadError,
    media_placeholder_id,
)
from jupyter_superfluid.engine.local import native
from jupyter_superfluid.media_sniff import MediaKind, sniff_media

__all__ = [
    "MediaKind",
    "MediaPiece",
    "MediaProjector",
    "MediaPrompt",
    "MediaStore",
    "TextPiece",
    "sniff_media",
]

_SUPPORTED = "an image (PNG, JPEG, GIF, BMP) or audio (WAV, MP3, FLAC) file"
_log_lock = threading.Lock()
_log_routed = False


@dataclass(frozen=True)
class TextPiece:
    """A run of text token ids."""

    tokens: tuple[int, ...]

    @property
    def n_pos(self) -> int:
        """Positions the run occupies (one per token)."""
        return len(self.tokens)


@dataclass(frozen=True)
class MediaPiece:
    """One encoded medium: its embeddings, positions and content digest."""

    kind: MediaKind
    embeddings: np.ndarray = field(compare=False, repr=False)  # float32 (n_tokens, n_embd)
    n_pos: int
    digest: str  # sha256 hex of the media bytes (equals mtmd's chunk id)

    @property
    def n_tokens(self) -> int:
        """Embedding rows (equals ``n_pos`` unless the text model uses M-RoPE)."""
        return int(self.embeddings.shape[0])

    @property
    def placeholder_id(self) -> int:
        """A negative id standing for every position of this medium in cache keys."""
        return media_placeholder_id(self.digest)


@dataclass(frozen=True)
class MediaPrompt:
    """A tokenized multimodal prompt: text runs and media blocks, in order.

    Text runs never touch each other; one medium may span several consecutive
    media pieces with the same digest (audio: one per started 30 s window).
    """

    pieces: tuple[TextPiece | MediaPiece, ...]

    @property
    def n_pos(self) -> int:
        """Positions the whole prompt occupies."""
        return sum(piece.n_pos for piece in self.pieces)

    def placeholder_tokens(self) -> tuple[int, ...]:
        """Flat cache key: text ids as they are, each media position as its placeholder id."""
        flat: list[int] = []
        for piece in self.pieces:
            if isinstance(piece, TextPiece):
                flat.extend(piece.tokens)
            else:
                flat.extend([piece.placeholder_id] * piece.n_pos)
        return tuple(flat)


def _route_mtmd_log() -> None:
    """Send mtmd's (clip, helper) log into native's captured llama.cpp log, once."""
    global _log_routed
    native.init_backend()
    with _log_lock:
        if not _log_routed:
            M.mtmd_helper_log_set(native._on_log, ctypes.c_void_p(0))  # also sets mtmd_log_set
            _log_routed = True


def _llama_reason(mark: int) -> str:
    """llama.cpp's logged reason since ``mark``, or a stand-in."""
    return "; ".join(native.log_errors_since(mark)) or "llama.cpp gave no reason"


class MediaProjector:
    """An mtmd context: a projector bound to one loaded text model."""

    def __init__(self, ctx: Any, *, n_embd: int, path: Path) -> None:
        self._ctx = ctx
        self._lock = threading.Lock()
        self.n_embd = n_embd
        self.path = path
        self.supports_images: bool = bool(M.mtmd_support_vision(ctx))
        self.supports_audio: bool = bool(M.mtmd_support_audio(ctx))
        self.audio_sample_rate: int | None = (
            M.mtmd_get_audio_sample_rate(ctx) if self.supports_audio else None
        )
        self.marker: str = (M.mtmd_get_marker(ctx) or M.mtmd_default_marker()).decode()
        self.uses_mrope: bool = bool(M.mtmd_decode_use_mrope(ctx))
        self.uses_non_causal: bool = bool(M.mtmd_decode_use_non_causal(ctx, None))

    @classmethod
    def load(
        cls, mmproj_path: str | os.PathLike[str], model: Any, *, threads: int | None = None
    ) -> MediaProjector:
        """Load ``mmproj_path`` for ``model`` (a ``llama_model*``) or raise ModelLoadError."""
        path = Path(mmproj_path)
        if not path.is_file():
            raise ModelLoadError(f"cannot load projector {path}: file not found")
        _route_mtmd_log()
        params = M.mtmd_context_params_default()
        params.use_gpu = False
        params.print_timings = False
        params.n_threads = threads or native.default_threads()
        mark = native.log_mark()
        ctx = M.mtmd_init_from_file(str(path).encode(), model, params)
        if not ctx:
            raise ModelLoadError(f"cannot load projector {path}: {_llama_reason(mark)}")
        return cls(ctx, n_embd=L.llama_model_n_embd_inp(model), path=path)

    def close(self) -> None:
        """Free the mtmd context (idempotent)."""
        with self._lock:
            if self._ctx is not None:
                M.mtmd_free(self._ctx)
                self._ctx = None

    def __enter__(self) -> MediaProjector:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def tokenize(self, text: str, media: Sequence[bytes]) -> MediaPrompt:
        """Tokenize ``text`` (one marker per medium) and encode ``media`` in order."""
        n_markers = text.count(self.marker)
        if n_markers != len(media):
            raise MediaError(
                f"the prompt has {n_markers} media marker(s) {self.marker!r} "
                f"but {len(media)} media were given"
            )
        kinds = [self._check_kind(i, data) for i, data in enumerate(media)]
        digests = [hashlib.sha256(data).hexdigest() for data in media]
        with self._lock:
            if self._ctx is None:
                raise MediaError("the media projector is closed")
            bitmaps: list[int] = []
            chunks = None
            try:
                for i, data in enumerate(media):
                    bitmaps.append(self._bitmap(i, data, kinds[i]))
                chunks = self._tokenize_chunks(text, bitmaps)
                return MediaPrompt(self._pieces(chunks, digests))
            finally:
                if chunks is not None:
                    M.mtmd_input_chunks_free(chunks)
                for bitmap in bitmaps:
                    M.mtmd_bitmap_free(bitmap)

    def _check_kind(self, index: int, data: bytes) -> MediaKind:
        """The medium's kind, if this projector takes it; MediaError otherwise."""
        kind = sniff_media(data)
        if kind is None:
            raise MediaError(f"medium {index} is not {_SUPPORTED}", index=index)
        if kind == "image" and not self.supports_images:
            raise MediaError(
                f"medium {index} is an image, but this model takes no images", index=index
            )
        if kind == "audio" and not self.supports_audio:
            raise MediaError(f"medium {index} is audio, but this model takes no audio", index=index)
        return kind

    def _bitmap(self, index: int, data: bytes, kind: MediaKind) -> int:
        """Decode one file into an mtmd bitmap (caller frees it)."""
        buf = (ctypes.c_uint8 * len(data)).from_buffer_copy(data)
        opt = M.mtmd_helper_init_opt_default()
        mark = native.log_mark()
        wrapper = M.mtmd_helper_bitmap_init_from_buf_wrapper(self._ctx, buf, len(data), False, opt)
        if wrapper.video_ctx:
            M.mtmd_helper_video_free(wrapper.video_ctx)
            if wrapper.bitmap:
                M.mtmd_bitmap_free(wrapper.bitmap)
            raise MediaError(
                f"medium {index} decodes as a video, which is not supported", index=index
            )
        if not wrapper.bitmap:
            raise MediaError(
                f"medium {index}: cannot decode the {kind} (corrupt?): {_llama_reason(mark)}",
                index=index,
            )
        return int(wrapper.bitmap)

    def _tokenize_chunks(self, text: str, bitmaps: list[int]) -> Any:
        """``mtmd_tokenize`` into a new chunk list (caller frees it)."""
        data = text.encode("utf-8")
        inp = M.mtmd_input_text(data, len(data), True, True)
        array = (M.mtmd_bitmap_p_ctypes * len(bitmaps))(*bitmaps)
        chunks = M.mtmd_input_chunks_init()
        mark = native.log_mark()
        rc = M.mtmd_tokenize(self._ctx, chunks, ctypes.byref(inp), array, len(bitmaps))
        if rc != 0:
            M.mtmd_input_chunks_free(chunks)
            what = "marker/media count mismatch" if rc == 1 else "media preprocessing failed"
            raise MediaError(f"cannot tokenize the prompt ({what}): {_llama_reason(mark)}")
        return chunks

    def _pieces(self, chunks: Any, digests: list[str]) -> tuple[TextPiece | MediaPiece, ...]:
        """Walk the chunks: text → token ids, media → encoded embeddings."""
        pieces: list[TextPiece | MediaPiece] = []
        for i in range(M.mtmd_input_chunks_size(chunks)):
            chunk = M.mtmd_input_chunks_get(chunks, i)
            if M.mtmd_input_chunk_get_type(chunk) == M.MTMD_INPUT_CHUNK_TYPE_TEXT:
                n = ctypes.c_size_t(0)
                ptr = M.mtmd_input_chunk_get_tokens_text(chunk, ctypes.byref(n))
                tokens = tuple(ptr[: n.value]) if n.value else ()
                last = pieces[-1] if pieces else None
                if isinstance(last, TextPiece):  # keep one run between media
                    pieces.pop()
                    tokens = last.tokens + tokens
                if tokens:
                    pieces.append(TextPiece(tokens))
            else:
                pieces.append(self._encode(chunk, digests))
        return tuple(pieces)

    def _encode(self, chunk: Any, digests: list[str]) -> MediaPiece:
        """Run the projector on one media chunk and copy out its embeddings."""
        mark = native.log_mark()
        if M.mtmd_encode_chunk(self._ctx, chunk) != 0:
            raise MediaError(f"cannot encode a media chunk: {_llama_reason(mark)}")
        n_tokens = M.mtmd_input_chunk_get_n_tokens(chunk)
        out = M.mtmd_get_output_embd(self._ctx)
        flat = np.ctypeslib.as_array(out, shape=(n_tokens * self.n_embd,))
        embeddings = np.array(flat, dtype=np.float32).reshape(n_tokens, self.n_embd)
        embeddings.flags.writeable = False
        raw_id = M.mtmd_input_chunk_get_id(chunk)
        digest = raw_id.decode() if raw_id else ""
        if digest not in digests:  # the helper names each bitmap by its bytes' sha256
            raise MediaError(f"a media chunk has an unexpected id {digest!r}")
        chunk_type = M.mtmd_input_chunk_get_type(chunk)
        kind: MediaKind = "audio" if chunk_type == M.MTMD_INPUT_CHUNK_TYPE_AUDIO else "image"
        return MediaPiece(kind, embeddings, M.mtmd_input_chunk_get_n_pos(chunk), digest)


class MediaStore:
    """Encoded media by key, so a prompt crosses the engine seam as placeholders and keys.

    The newest pieces are kept up to ``max_bytes`` of embeddings; a generation holds
    the pieces it uses, so dropping one only refuses a later request naming it.
    """

    def __init__(self, max_bytes: int = 512 << 20) -> None:
        self._max_bytes = max_bytes
        self._pieces: OrderedDict[str, MediaPiece] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def add(self, prompt: MediaPrompt) -> MediaTokens:
        """Keep ``prompt``'s media; its placeholder tokens and a reference to each piece."""
        refs: list[MediaRef] = []
        seen: dict[str, int] = {}
        with self._lock:
            for piece in prompt.pieces:
                if not isinstance(piece, MediaPiece):
                    continue
                n = seen[piece.digest] = seen.get(piece.digest, -1) + 1
                key = f"{piece.digest}:{n}"
                self._put(key, piece)
                refs.append(MediaRef(key, piece.kind, piece.n_pos, piece.digest))
            self._trim(keep=len(refs))
        return MediaTokens(prompt.placeholder_tokens(), tuple(refs))

    def get(self, ref: MediaRef) -> MediaPiece:
        """The piece ``ref`` names; EngineError when it is no longer kept."""
        with self._lock:
            piece = self._pieces.get(ref.key)
            if piece is not None:
                self._pieces.move_to_end(ref.key)
        if piece is None or piece.n_pos != ref.n_pos:
            raise EngineError(f"the engine no longer holds {ref.kind} {ref.key}; tokenize again")
        return piece

    def _put(self, key: str, piece: MediaPiece) -> None:
        old = self._pieces.pop(key, None)
        if old is not None:
            self._bytes -= old.embeddings.nbytes
        self._pieces[key] = piece
        self._bytes += piece.embeddings.nbytes

    def _trim(self, keep: int) -> None:
        """Drop the oldest pieces past the budget, never the newest ``keep``."""
        while self._bytes > self._max_bytes and len(self._pieces) > keep:
            _, piece = self._pieces.popitem(last=False)
            self._bytes -= piece.embeddings.nbytes

"""Images and audio through llama.cpp's mtmd: tiny projectors, real llama.cpp, no mocks."""

from __future__ import annotations

import ctypes
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import gguf
import llama_cpp.llama_cpp as L
import numpy as np
import pytest
from support.media_samples import png, wav

from jupyter_superfluid.builtin_models.templates import CHATML
from jupyter_superfluid.builtin_models.tiny_gguf import build_model
from jupyter_superfluid.builtin_models.tiny_mmproj import (
    AUDIO_TOKENS_PER_WINDOW,
    IMAGE_TOKENS,
    build_mmproj,
)
from jupyter_superfluid.engine.base import ModelLoadError
from jupyter_superfluid.engine.local import native
from jupyter_superfluid.engine.local.media import (
    MediaError,
    MediaPiece,
    MediaProjector,
    TextPiece,
    sniff_media,
)

N_EMBD = 64


@pytest.fixture(scope="module")
def text_model(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A tiny text model (n_embd 64), loaded."""
    path = build_model(tmp_path_factory.mktemp("mm") / "text.gguf", chat_template=CHATML)
    model = native.load_model(path)
    yield model
    L.llama_model_free(model)


@pytest.fixture(scope="module")
def vision(tmp_path_factory: pytest.TempPathFactory, text_model: Any) -> Iterator[MediaProjector]:
    """The tiny vision projector, loaded against the text model."""
    path = build_mmproj(tmp_path_factory.mktemp("mm") / "v.gguf", text_n_embd=N_EMBD)
    with MediaProjector.load(path, text_model, threads=1) as projector:
        yield projector


@pytest.fixture(scope="module")
def audio(tmp_path_factory: pytest.TempPathFactory, text_model: Any) -> Iterator[MediaProjector]:
    """The tiny audio projector, loaded against the text model."""
    path = build_mmproj(tmp_path_factory.mktemp("mm") / "a.gguf", text_n_embd=N_EMBD, kind="audio")
    with MediaProjector.load(path, text_model, threads=1) as projector:
        yield projector


def prompt(marker: str) -> str:
    """A ChatML user turn holding one medium."""
    return f"<|im_start|>user\n{marker}describe<|im_end|>\n<|im_start|>assistant\n"


def test_builder_is_deterministic(tmp_path: Path) -> None:
    a = build_mmproj(tmp_path / "a.gguf", text_n_embd=N_EMBD, seed=3).read_bytes()
    b = build_mmproj(tmp_path / "b.gguf", text_n_embd=N_EMBD, seed=3).read_bytes()
    c = build_mmproj(tmp_path / "c.gguf", text_n_embd=N_EMBD, seed=4).read_bytes()
    assert a == b != c
    fields = gguf.GGUFReader(tmp_path / "a.gguf").fields
    assert fields["general.architecture"].contents() == "clip"
    assert fields["clip.projector_type"].contents() == "mlp"


def test_projector_capabilities(vision: MediaProjector, audio: MediaProjector) -> None:
    assert (vision.supports_images, vision.supports_audio) == (True, False)
    assert (audio.supports_images, audio.supports_audio) == (False, True)
    assert vision.marker == audio.marker == "<__media__>"
    assert audio.audio_sample_rate == 16000
    for projector in (vision, audio):
        assert not projector.uses_mrope and not projector.uses_non_causal


def test_image_prompt_structure(vision: MediaProjector) -> None:
    image = png(20, 12, seed=1)
    result = vision.tokenize(prompt(vision.marker), [image])
    kinds = [type(piece) for piece in result.pieces]
    assert kinds == [TextPiece, MediaPiece, TextPiece]
    media = result.pieces[1]
    assert isinstance(media, MediaPiece)
    assert media.kind == "image"
    assert media.embeddings.dtype == np.float32
    assert media.embeddings.shape == (IMAGE_TOKENS, N_EMBD)
    assert np.isfinite(media.embeddings).all()
    assert media.n_pos == media.n_tokens == IMAGE_TOKENS
    keys = result.placeholder_tokens()
    assert len(keys) == result.n_pos
    assert keys.count(media.placeholder_id) == media.n_pos
    assert media.placeholder_id < 0
    assert all(t >= 0 for t in keys if t != media.placeholder_id)


def test_digests_follow_the_bytes(vision: MediaProjector) -> None:
    text = prompt(vision.marker)
    first = vision.tokenize(text, [png(16, 16, seed=1)])
    again = vision.tokenize(text, [png(16, 16, seed=1)])
    other = vision.tokenize(text, [png(16, 16, seed=2)])
    assert first == again
    assert first.placeholder_tokens() == again.placeholder_tokens()
    assert first.pieces[1] != other.pieces[1]
    assert first.placeholder_tokens() != other.placeholder_tokens()
    assert first.pieces[0] == other.pieces[0] and first.pieces[2] == other.pieces[2]


def test_two_images_in_order(vision: MediaProjector) -> None:
    a, b = png(8, 8, seed=5), png(8, 8, seed=6)
    text = f"one {vision.marker} two {vision.marker} end"
    result = vision.tokenize(text, [a, b])
    media = [p for p in result.pieces if isinstance(p, MediaPiece)]
    assert len(media) == 2
    assert media[0].placeholder_id != media[1].placeholder_id
    swapped = vision.tokenize(text, [b, a])
    assert [p.digest for p in swapped.pieces if isinstance(p, MediaPiece)] == [
        media[1].digest,
        media[0].digest,
    ]


def test_text_only_prompt(vision: MediaProjector) -> None:
    result = vision.tokenize("<|im_start|>user\nhi<|im_end|>\n", [])
    assert len(result.pieces) == 1 and isinstance(result.pieces[0], TextPiece)


@pytest.mark.parametrize("data", [b"", b"not an image at all", b"\x89PNG\r\n\x1a\n" + b"\x00" * 40])
def test_bad_bytes(vision: MediaProjector, data: bytes) -> None:
    with pytest.raises(MediaError):
        vision.tokenize(prompt(vision.marker), [data])


def test_marker_count_mismatch(vision: MediaProjector) -> None:
    with pytest.raises(MediaError, match="marker"):
        vision.tokenize(prompt(vision.marker), [])
    with pytest.raises(MediaError, match="marker"):
        vision.tokenize("no marker", [png(8, 8, seed=1)])


def test_wrong_kind_for_projector(vision: MediaProjector, audio: MediaProjector) -> None:
    with pytest.raises(MediaError, match="no audio"):
        vision.tokenize(prompt(vision.marker), [wav(0.5, 440)])
    with pytest.raises(MediaError, match="no images"):
        audio.tokenize(prompt(audio.marker), [png(8, 8, seed=1)])


def test_sniff_media() -> None:
    assert sniff_media(png(4, 4, seed=0)) == "image"
    assert sniff_media(b"\xff\xd8\xff\xe0" + b"\x00" * 16) == "image"
    assert sniff_media(wav(0.1, 440)) == "audio"
    assert sniff_media(b"hello world, plain text") is None


def test_audio_prompt_structure(audio: MediaProjector) -> None:
    result = audio.tokenize(prompt(audio.marker), [wav(1.0, 440)])
    assert [type(p) for p in result.pieces] == [TextPiece, MediaPiece, TextPiece]
    media = result.pieces[1]
    assert isinstance(media, MediaPiece) and media.kind == "audio"
    assert media.embeddings.shape == (AUDIO_TOKENS_PER_WINDOW, N_EMBD)
    assert np.isfinite(media.embeddings).all()
    assert len(result.placeholder_tokens()) == result.n_pos


def test_long_audio_spans_windows(audio: MediaProjector) -> None:
    result = audio.tokenize(prompt(audio.marker), [wav(31.0, 220)])
    media = [p for p in result.pieces if isinstance(p, MediaPiece)]
    assert [m.n_tokens for m in media] == [AUDIO_TOKENS_PER_WINDOW] * 2
    assert media[0].digest == media[1].digest
    keys = result.placeholder_tokens()
    assert keys.count(media[0].placeholder_id) == 2 * AUDIO_TOKENS_PER_WINDOW


def test_concurrent_tokenize_is_serialized(vision: MediaProjector) -> None:
    text, image = prompt(vision.marker), png(40, 30, seed=11)
    expected = vision.tokenize(text, [image]).pieces[1]
    assert isinstance(expected, MediaPiece)
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda _: vision.tokenize(text, [image]), range(8)))
    for result in results:
        piece = result.pieces[1]
        assert isinstance(piece, MediaPiece)
        np.testing.assert_array_equal(piece.embeddings, expected.embeddings)


def test_load_errors(tmp_path: Path, text_model: Any) -> None:
    with pytest.raises(ModelLoadError, match="not found"):
        MediaProjector.load(tmp_path / "missing.gguf", text_model)
    wrong = build_mmproj(tmp_path / "w.gguf", text_n_embd=N_EMBD * 2)
    with pytest.raises(ModelLoadError, match="n_embd"):
        MediaProjector.load(wrong, text_model)


def _decode(ctx: Any, start: int, tokens: tuple[int, ...] | None, embd: np.ndarray | None) -> int:
    """Decode one token run or one embedding block at ``start``; return the next position."""
    n = len(tokens) if tokens is not None else len(embd)  # type: ignore[arg-type]
    batch = L.llama_batch_init(n, 0 if embd is None else embd.shape[1], 1)
    try:
        for i in range(n):
            if tokens is not None:
                batch.token[i] = tokens[i]
            batch.pos[i] = start + i
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = 0
            batch.logits[i] = i == n - 1
        if embd is not None:
            data = np.ascontiguousarray(embd, dtype=np.float32)
            ctypes.memmove(batch.embd, data.ctypes.data, data.nbytes)
        batch.n_tokens = n
        assert L.llama_decode(ctx, batch) == 0
    finally:
        L.llama_batch_free(batch)
    return start + n


@pytest.mark.parametrize("kind", ["image", "audio"])
def test_decode_end_to_end(
    kind: str, vision: MediaProjector, audio: MediaProjector, text_model: Any
) -> None:
    projector, data = (vision, png(24, 24, seed=9)) if kind == "image" else (audio, wav(0.7, 300))
    result = projector.tokenize(prompt(projector.marker), [data])
    ctx = native.create_context(text_model, n_ctx=512, n_seq_max=1, n_batch=512, threads=1)
    try:
        pos = 0
        for piece in result.pieces:
            if isinstance(piece, TextPiece):
                pos = _decode(ctx, pos, piece.tokens, None)
            else:
                pos = _decode(ctx, pos, None, piece.embeddings)
        assert pos == result.n_pos
        n_vocab = L.llama_vocab_n_tokens(L.llama_model_get_vocab(text_model))
        logits = np.ctypeslib.as_array(L.llama_get_logits_ith(ctx, -1), shape=(n_vocab,))
        assert np.isfinite(logits).all()
    finally:
        L.llama_free(ctx)

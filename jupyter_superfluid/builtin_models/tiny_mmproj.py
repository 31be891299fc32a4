"""Deterministic tiny multimodal projectors ("mmproj" GGUF files) for tests.

llama.cpp's ``mtmd`` loads a projector next to a text model and turns images
(or audio) into embeddings the text model reads in place of tokens. This
module writes seeded random projectors small enough that encoding takes
milliseconds, for the tiny ``llama`` text models of ``tiny_gguf``:

- ``kind="vision"``: projector type ``mlp`` (LLaVA-1.5 style). A 2-layer ViT
  (of which llava's graph runs all but the last) over a ``IMAGE_SIZE`` square
  image cut into ``PATCH_SIZE`` patches, then a 2-layer MLP into the text
  model's embedding width. Every image is resized (padded) to the square, so
  it always gives ``IMAGE_TOKENS`` embeddings; mtmd adds no begin/end tokens
  around them, and the text model decodes them causally with 1-D positions.
- ``kind="audio"``: projector type ``ultravox``. A whisper-style encoder
  (two 1-D convolutions and one transformer layer over 80-bin log-mel
  frames), frames stacked by ``AUDIO_STACK``, then a SwiGLU projector. mtmd pads audio to
  30 s windows of 3000 mel frames, so every started window gives
  ``AUDIO_TOKENS_PER_WINDOW`` embeddings; no begin/end tokens either.

Same inputs give a byte-identical file.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import gguf
import numpy as np

MediaKind = Literal["vision", "audio"]

IMAGE_SIZE = 32
PATCH_SIZE = 8
IMAGE_TOKENS = (IMAGE_SIZE // PATCH_SIZE) ** 2
N_MEL = 80
AUDIO_FRAMES = 3000  # mel frames per 30 s window (whisper)
# Frames stacked per embedding. Must divide the 1500 encoder frames: llama.cpp
# 0.3.36 counts ``3000 / stack / 2`` tokens (floor) but its graph pads the last
# stack (ceil), and a mismatch aborts the process (real ultravox uses 8: 187 vs 188).
AUDIO_STACK = 30
AUDIO_TOKENS_PER_WINDOW = AUDIO_FRAMES // 2 // AUDIO_STACK

_WIDTH = 32  # encoder width
_N_HEAD = 2
_N_FF = 4 * _WIDTH
_N_LAYER_VISION = 2
_N_LAYER_AUDIO = 1
_EPS = 1e-6

Tensors = list[tuple[str, np.ndarray]]
Mat = Callable[..., np.ndarray]


def _random(seed: int) -> Mat:
    """A seeded Gaussian tensor factory: ``mat(*shape, scale=...)``."""
    rng = np.random.default_rng(seed)

    def mat(*shape: int, scale: float = 1.0) -> np.ndarray:
        """A seeded Gaussian tensor of ``shape`` (numpy order: outputs first)."""
        return (rng.standard_normal(shape, dtype=np.float32) * scale).astype(np.float32)

    return mat


def _ones(n: int) -> np.ndarray:
    """A float32 vector of ones (a norm weight)."""
    return np.ones(n, dtype=np.float32)


def _zeros(*shape: int) -> np.ndarray:
    """A float32 zero tensor (a bias)."""
    return np.zeros(shape, dtype=np.float32)


def _encoder_layers(prefix: str, n_layer: int, mat: Mat) -> Tensors:
    """Pre-norm transformer blocks with clip.cpp's names (whisper: no key bias)."""
    d, scale = _WIDTH, 1.0 / np.sqrt(_WIDTH)
    tensors: Tensors = []
    for i in range(n_layer):
        blk = f"{prefix}.blk.{i}."
        tensors += [
            (blk + "ln1.weight", _ones(d)),
            (blk + "ln1.bias", _zeros(d)),
            (blk + "attn_q.weight", mat(d, d, scale=scale)),
            (blk + "attn_q.bias", _zeros(d)),
            (blk + "attn_k.weight", mat(d, d, scale=scale)),
            (blk + "attn_v.weight", mat(d, d, scale=scale)),
            (blk + "attn_v.bias", _zeros(d)),
            (blk + "attn_out.weight", mat(d, d, scale=0.5 * scale)),
            (blk + "attn_out.bias", _zeros(d)),
            (blk + "ln2.weight", _ones(d)),
            (blk + "ln2.bias", _zeros(d)),
            (blk + "ffn_up.weight", mat(_N_FF, d, scale=scale)),
            (blk + "ffn_up.bias", _zeros(_N_FF)),
            (blk + "ffn_down.weight", mat(d, _N_FF, scale=0.5 / np.sqrt(_N_FF))),
            (blk + "ffn_down.bias", _zeros(d)),
        ]
    return tensors


def _vision_tensors(text_n_embd: int, mat: Mat) -> Tensors:
    """ViT patch/position embeddings, blocks and the llava 2-layer MLP."""
    d, n = _WIDTH, text_n_embd
    patch_in = 3 * PATCH_SIZE * PATCH_SIZE
    tensors: Tensors = [
        ("v.patch_embd.weight", mat(d, 3, PATCH_SIZE, PATCH_SIZE, scale=1.0 / np.sqrt(patch_in))),
        ("v.patch_embd.bias", _zeros(d)),
        ("v.position_embd.weight", mat(IMAGE_TOKENS, d, scale=0.1)),
    ]
    tensors += _encoder_layers("v", _N_LAYER_VISION, mat)
    tensors += [
        ("mm.0.weight", mat(n, d, scale=1.0 / np.sqrt(d))),
        ("mm.0.bias", _zeros(n)),
        ("mm.2.weight", mat(n, n, scale=1.0 / np.sqrt(n))),
        ("mm.2.bias", _zeros(n)),
    ]
    return tensors


def _audio_tensors(text_n_embd: int, mat: Mat) -> Tensors:
    """Whisper convolutions, position embeddings, blocks and the ultravox projector."""
    d, n = _WIDTH, text_n_embd
    stacked, hidden = d * AUDIO_STACK, 2 * n
    tensors: Tensors = [
        # conv kernels: (out, in, width); biases broadcast over frames: (out, 1)
        ("a.conv1d.1.weight", mat(d, N_MEL, 3, scale=1.0 / np.sqrt(3 * N_MEL))),
        ("a.conv1d.1.bias", _zeros(d, 1)),
        ("a.conv1d.2.weight", mat(d, d, 3, scale=1.0 / np.sqrt(3 * d))),
        ("a.conv1d.2.bias", _zeros(d, 1)),
        ("a.position_embd.weight", mat(AUDIO_FRAMES // 2, d, scale=0.1)),
    ]
    tensors += _encoder_layers("a", _N_LAYER_AUDIO, mat)
    tensors += [
        ("mm.a.norm_pre.weight", _ones(stacked)),
        ("mm.a.mlp.1.weight", mat(2 * hidden, stacked, scale=1.0 / np.sqrt(stacked))),
        ("mm.a.norm_mid.weight", _ones(hidden)),
        ("mm.a.mlp.2.weight", mat(n, hidden, scale=1.0 / np.sqrt(hidden))),
    ]
    return tensors


def _write_encoder_keys(w: gguf.GGUFWriter, section: str, text_n_embd: int, n_layer: int) -> None:
    """The ``clip.{section}.*`` hyperparameters every encoder needs."""
    w.add_uint32(f"clip.{section}.embedding_length", _WIDTH)
    w.add_uint32(f"clip.{section}.feed_forward_length", _N_FF)
    w.add_uint32(f"clip.{section}.block_count", n_layer)
    w.add_uint32(f"clip.{section}.projection_dim", text_n_embd)
    w.add_uint32(f"clip.{section}.attention.head_count", _N_HEAD)
    w.add_float32(f"clip.{section}.attention.layer_norm_epsilon", _EPS)


def _write_metadata(w: gguf.GGUFWriter, kind: MediaKind, text_n_embd: int) -> None:
    """General and ``clip.*`` keys for a vision (mlp) or audio (ultravox) projector."""
    w.add_name(f"superfluid-tiny-mmproj-{kind}")
    w.add_file_type(int(gguf.LlamaFileType.ALL_F32))
    w.add_bool("clip.has_vision_encoder", kind == "vision")
    w.add_bool("clip.has_audio_encoder", kind == "audio")
    if kind == "vision":
        w.add_string("clip.projector_type", "mlp")
        _write_encoder_keys(w, "vision", text_n_embd, _N_LAYER_VISION)
        w.add_uint32("clip.vision.image_size", IMAGE_SIZE)
        w.add_uint32("clip.vision.patch_size", PATCH_SIZE)
        w.add_array("clip.vision.image_mean", [0.5, 0.5, 0.5])
        w.add_array("clip.vision.image_std", [0.5, 0.5, 0.5])
    else:
        w.add_string("clip.projector_type", "ultravox")
        _write_encoder_keys(w, "audio", text_n_embd, _N_LAYER_AUDIO)
        w.add_uint32("clip.audio.num_mel_bins", N_MEL)
        w.add_uint32("clip.audio.projector.stack_factor", AUDIO_STACK)


def build_mmproj(
    path: str | os.PathLike[str],
    *,
    text_n_embd: int,
    kind: MediaKind = "vision",
    seed: int = 0,
) -> Path:
    """Write a seeded random projector for a text model ``text_n_embd`` wide; return the path."""
    if kind not in ("vision", "audio"):
        raise ValueError(f"kind must be 'vision' or 'audio', not {kind!r}")
    if text_n_embd <= 0:
        raise ValueError("text_n_embd must be positive")
    mat = _random(seed)
    tensors = (_vision_tensors if kind == "vision" else _audio_tensors)(text_n_embd, mat)
    path = Path(path)
    writer = gguf.GGUFWriter(path, "clip")
    _write_metadata(writer, kind, text_n_embd)
    for name, tensor in tensors:
        writer.add_tensor(name, tensor)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path

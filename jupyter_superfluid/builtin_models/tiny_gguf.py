"""Deterministic tiny GGUF models, built with the ``gguf`` package.

The built-in test models (``superfluid/tiny-chatml``, ``superfluid/tiny-qwen3``)
are ``llama``-architecture models with seeded random weights and a byte-level
BPE (``gpt2``) vocabulary: the 256 GPT-2 byte tokens, a few merges (llama.cpp
refuses a ``gpt2`` tokenizer without merges) and the ChatML/Qwen special tokens as
control tokens. A model built for another chat template (``Vocab``) also gets that
template's own markers as control tokens (``<|start_header_id|>``, ``[TOOL_CALLS]``,
``<turn|>``…), so they are single tokens as in the real models, its end-of-turn
markers as the end-of-generation tokens, and ``<s>``/``</s>``/``<unk>``: llama.cpp
looks those up by text for models whose name says Phi-3, and without them failed to
load the vocabulary ("unordered_map::at"). Same inputs give a byte-identical file,
so a cache of built models never goes stale silently (the file name carries a hash of
the inputs). A model built with ``fim`` (``superfluid/tiny-qwen3``) also has Qwen's
fill-in-the-middle tokens, last in the vocabulary (so no other id moves), and the
``tokenizer.ggml.fim_*_token_id`` keys naming them.

A constant "bias channel" (residual channel 0) is set in every token
embedding and never written by attention or the MLP; the output row of
``<|im_end|>`` reads it, so that token gets a steady logit boost and the random
model ends its answers on its own after a few dozen tokens under default
sampling, while greedy decoding does not stop at once; the same channel
favours printable ASCII and keeps the other control tokens rare.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import gguf
import numpy as np

from jupyter_superfluid.builtin_models.templates import CHATML, QWEN3, SPECIAL_TOKENS

BUILDER_VERSION = 1
EOS_TOKEN = "<|im_end|>"
BOS_TOKEN = "<|endoftext|>"
# Qwen's fill-in-the-middle tokens: prefix, suffix, middle. Not <|fim_pad|>: llama.cpp
# makes it an end-of-generation token, which would let the tiny model end on it.
FIM_TOKENS = ("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>")

# A few common English merges (pieces in GPT-2 byte-to-unicode form; "Ġ" is a
# space). Later merges may use the results of earlier ones.
_MERGES = (
    ("Ġ", "t"),
    ("h", "e"),
    ("i", "n"),
    ("e", "r"),
    ("a", "n"),
    ("Ġ", "a"),
    ("o", "n"),
    ("r", "e"),
    ("Ġt", "he"),
    ("Ġ", "s"),
)

# Logit offsets through the bias channel (the random logits spread about ±3):
# tuned so that sampling at temperature 0.8 ends after a few dozen tokens while
# greedy decoding runs on for a while.
_EOS_BIAS = 5.0
_SPECIAL_PENALTY = 8.0
_ASCII_BOOST = 3.0
_LOGIT_SCALE = 3.0
_BIAS_CHANNEL_VALUE = 4.0


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte → printable unicode character map."""
    printable = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("¡"), ord("¬") + 1))
        + list(range(ord("®"), ord("ÿ") + 1))
    )
    mapping = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in mapping:
            mapping[b] = chr(256 + extra)
            extra += 1
    return mapping


# Looked up by text by llama.cpp's vocabulary loader for some model names (Phi-3).
_ALWAYS_SPECIAL = ("<s>", "</s>", "<unk>")


def special_tokens_of(extra: Sequence[str] = ()) -> list[str]:
    """The control tokens of a tiny model: the built-in ones, then (for a model of another
    template) ``<s>``, ``</s>``, ``<unk>`` and ``extra``."""
    wanted = [t for t in extra if t and t not in SPECIAL_TOKENS]
    if not wanted:
        return list(SPECIAL_TOKENS)
    return list(dict.fromkeys((*SPECIAL_TOKENS, *_ALWAYS_SPECIAL, *wanted)))


def vocabulary(
    extra: Sequence[str] = (), *, fim: bool = False
) -> tuple[list[str], list[int], list[str]]:
    """The tiny models' tokens, token types and merges (``extra`` control tokens, then the
    FIM tokens if ``fim``, last)."""
    byte_map = bytes_to_unicode()
    tokens = [byte_map[b] for b in range(256)]
    types = [int(gguf.TokenType.NORMAL)] * 256
    merges = []
    for left, right in _MERGES:
        merges.append(f"{left} {right}")
        tokens.append(left + right)
        types.append(int(gguf.TokenType.NORMAL))
    for special in (*special_tokens_of(extra), *(FIM_TOKENS if fim else ())):
        if special in tokens:
            continue
        tokens.append(special)
        types.append(int(gguf.TokenType.CONTROL))
    return tokens, types, merges


@dataclass(frozen=True)
class ModelShape:
    """Sizes of a built model."""

    n_layer: int = 2
    n_embd: int = 64
    n_head: int = 4
    n_head_kv: int | None = None
    n_ff: int | None = None
    context_length: int = 4096
    seed: int = 0
    f16: bool = False


@dataclass(frozen=True)
class Vocab:
    """A tiny model's vocabulary: extra control tokens, and which ones end a generation."""

    special_tokens: tuple[str, ...] = ()
    eos_token: str = EOS_TOKEN
    eog_tokens: tuple[str, ...] = ()  # up to two more end-of-generation tokens (eot, eom)
    fim: bool = False  # with the fill-in-the-middle tokens (FIM_TOKENS), last
    add_bos: bool = False  # the tokenizer puts the BOS first (as Llama 3 and Gemma GGUFs do)

    @property
    def tokens(self) -> tuple[list[str], list[int], list[str]]:
        """(tokens, token types, merges)."""
        extra = (*self.special_tokens, self.eos_token, *self.eog_tokens)
        return vocabulary(extra, fim=self.fim)


def _wire_bias_channel(out: np.ndarray, eos_id: int, n_special: int) -> None:
    """Make output column 0 (the constant channel) a steady per-token logit offset.

    A boost for <|im_end|> (answers end by themselves) and printable ASCII
    (readable gibberish), a penalty for the other control tokens (so the model
    rarely emits them unprompted).
    """
    n_vocab, d = out.shape
    # After RMS norm, channel 0 is about value/rms of the embedding row.
    unit = np.sqrt(1.0 + _BIAS_CHANNEL_VALUE**2 / d) / _BIAS_CHANNEL_VALUE
    out[:, 0] = 0.0
    out[0x20:0x7F, 0] = _ASCII_BOOST * unit
    out[256 : n_vocab - n_special, 0] = _ASCII_BOOST * unit  # the merges
    out[n_vocab - n_special :, 0] = -_SPECIAL_PENALTY * unit
    out[eos_id, 0] = _EOS_BIAS * unit


def _weights(
    shape: ModelShape, n_vocab: int, eos_id: int, n_special: int, n_last: int = 0
) -> list[tuple[str, np.ndarray]]:
    """Seeded random tensors, numpy shapes (rows=outputs, cols=inputs); the rows of the
    ``n_last`` tokens are drawn after all else, so adding them changes no other tensor."""
    rng = np.random.default_rng(shape.seed)
    d = shape.n_embd
    head_dim = d // shape.n_head
    d_kv = head_dim * (shape.n_head_kv or shape.n_head)
    n_ff = shape.n_ff or 4 * d

    def mat(rows: int, cols: int, scale: float) -> np.ndarray:
        """A seeded Gaussian matrix."""
        return (rng.standard_normal((rows, cols), dtype=np.float32) * scale).astype(np.float32)

    embd = mat(n_vocab - n_last, d, 1.0)
    out = mat(n_vocab - n_last, d, _LOGIT_SCALE / np.sqrt(d))
    tensors = [("token_embd.weight", embd)]
    for i in range(shape.n_layer):
        blk = f"blk.{i}."
        layer = [
            ("attn_norm.weight", np.ones(d, dtype=np.float32)),
            ("attn_q.weight", mat(d, d, 1.0 / np.sqrt(d))),
            ("attn_k.weight", mat(d_kv, d, 1.0 / np.sqrt(d))),
            ("attn_v.weight", mat(d_kv, d, 1.0 / np.sqrt(d))),
            ("attn_output.weight", mat(d, d, 0.5 / np.sqrt(d))),
            ("ffn_norm.weight", np.ones(d, dtype=np.float32)),
            ("ffn_gate.weight", mat(n_ff, d, 1.0 / np.sqrt(d))),
            ("ffn_up.weight", mat(n_ff, d, 1.0 / np.sqrt(d))),
            ("ffn_down.weight", mat(d, n_ff, 0.5 / np.sqrt(n_ff))),
        ]
        for name, w in layer:
            if name in ("attn_output.weight", "ffn_down.weight"):
                w[0, :] = 0.0  # never write the bias channel
            tensors.append((blk + name, w))
    if n_last:
        embd = np.concatenate([embd, mat(n_last, d, 1.0)])
        out = np.concatenate([out, mat(n_last, d, _LOGIT_SCALE / np.sqrt(d))])
        tensors[0] = ("token_embd.weight", embd)
    embd[:, 0] = _BIAS_CHANNEL_VALUE  # the constant bias channel
    _wire_bias_channel(out, eos_id, n_special)
    tensors.append(("output_norm.weight", np.ones(d, dtype=np.float32)))
    tensors.append(("output.weight", out))
    if shape.f16:
        tensors = [(n, w.astype(np.float16) if w.ndim == 2 else w) for n, w in tensors]
    return tensors


def _write_metadata(
    w: gguf.GGUFWriter, shape: ModelShape, chat_template: str, name: str, vocab: Vocab
) -> None:
    """Hyperparameters and tokenizer keys."""
    tokens, types, merges = vocab.tokens
    w.add_name(name)
    w.add_file_type(int(gguf.LlamaFileType.MOSTLY_F16 if shape.f16 else gguf.LlamaFileType.ALL_F32))
    w.add_context_length(shape.context_length)
    w.add_embedding_length(shape.n_embd)
    w.add_block_count(shape.n_layer)
    w.add_feed_forward_length(shape.n_ff or 4 * shape.n_embd)
    w.add_head_count(shape.n_head)
    w.add_head_count_kv(shape.n_head_kv or shape.n_head)
    w.add_rope_dimension_count(shape.n_embd // shape.n_head)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(len(tokens))
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(tokens.index(BOS_TOKEN))
    w.add_eos_token_id(tokens.index(vocab.eos_token))
    others = [t for t in vocab.eog_tokens if t != vocab.eos_token]
    if others:
        w.add_eot_token_id(tokens.index(others[0]))
    if len(others) > 1:
        w.add_eom_token_id(tokens.index(others[1]))
    w.add_pad_token_id(tokens.index(BOS_TOKEN))
    if vocab.fim:
        keys = gguf.Keys.Tokenizer
        pre, suf, mid = (tokens.index(t) for t in FIM_TOKENS)
        w.add_uint32(keys.FIM_PRE_ID, pre)
        w.add_uint32(keys.FIM_SUF_ID, suf)
        w.add_uint32(keys.FIM_MID_ID, mid)
    w.add_add_bos_token(vocab.add_bos)
    w.add_chat_template(chat_template)


def build_model(
    path: str | os.PathLike[str],
    *,
    chat_template: str,
    n_layer: int = 2,
    n_embd: int = 64,
    n_head: int = 4,
    n_head_kv: int | None = None,
    n_ff: int | None = None,
    context_length: int = 4096,
    seed: int = 0,
    f16: bool = False,
    name: str = "superfluid-tiny",
    vocab: Vocab | None = None,
) -> Path:
    """Write a deterministic random ``llama`` GGUF model to ``path``; return the path."""
    shape = ModelShape(n_layer, n_embd, n_head, n_head_kv, n_ff, context_length, seed, f16)
    if n_embd % n_head or n_head % (n_head_kv or n_head):
        raise ValueError("n_embd must divide by n_head, and n_head by n_head_kv")
    vocab = vocab or Vocab()
    tokens, types, _ = vocab.tokens
    n_special = sum(t == int(gguf.TokenType.CONTROL) for t in types)
    path = Path(path)
    writer = gguf.GGUFWriter(path, "llama")
    _write_metadata(writer, shape, chat_template, name, vocab)
    eos = tokens.index(vocab.eos_token)
    n_fim = len(FIM_TOKENS) if vocab.fim else 0
    for tensor_name, tensor in _weights(shape, len(tokens), eos, n_special, n_fim):
        writer.add_tensor(tensor_name, tensor)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


@dataclass(frozen=True)
class BuiltinModel:
    """A model the package builds itself: a template and build parameters."""

    chat_template: str
    n_layer: int = 2
    n_embd: int = 64
    n_head: int = 4
    context_length: int = 4096
    seed: int = 0
    projector: Literal["vision", "audio"] | None = None  # a tiny mmproj built beside it
    fim: bool = False  # with fill-in-the-middle tokens (Vocab.fim)

    def file_name(self, model_id: str) -> str:
        """Cache file name: the id's last part plus a hash of every build input."""
        blob = json.dumps([BUILDER_VERSION, asdict(self)], sort_keys=True).encode()
        # The builder's own source counts as an input: a retuned builder must
        # not pick up files an older one left in a shared cache.
        digest = hashlib.sha256(blob + Path(__file__).read_bytes()).hexdigest()[:12]
        return f"{model_id.rsplit('/', 1)[-1]}-{digest}.gguf"


BUILTIN_MODELS: dict[str, BuiltinModel] = {
    "superfluid/tiny-chatml": BuiltinModel(chat_template=CHATML, seed=1),
    "superfluid/tiny-qwen3": BuiltinModel(chat_template=QWEN3, seed=2, fim=True),
    "superfluid/tiny-vision": BuiltinModel(chat_template=CHATML, seed=3, projector="vision"),
    "superfluid/tiny-audio": BuiltinModel(chat_template=CHATML, seed=4, projector="audio"),
}


def ensure_builtin(model_id: str, cache_dir: str | os.PathLike[str]) -> Path:
    """Path of built-in ``model_id`` in ``cache_dir``, building it on first use."""
    spec = BUILTIN_MODELS.get(model_id)
    if spec is None:
        raise KeyError(model_id)
    return build_cached(
        Path(cache_dir) / spec.file_name(model_id),
        chat_template=spec.chat_template,
        n_layer=spec.n_layer,
        n_embd=spec.n_embd,
        n_head=spec.n_head,
        context_length=spec.context_length,
        seed=spec.seed,
        name=model_id,
        vocab=Vocab(fim=True) if spec.fim else None,
    )


def ensure_builtin_projector(model_id: str, cache_dir: str | os.PathLike[str]) -> Path | None:
    """Path of built-in ``model_id``'s projector (built on first use); None if it has none."""
    spec = BUILTIN_MODELS.get(model_id)
    if spec is None:
        raise KeyError(model_id)
    kind = spec.projector
    if kind is None:
        return None
    from jupyter_superfluid.builtin_models.tiny_mmproj import build_mmproj

    target = Path(cache_dir) / spec.file_name(model_id).replace(".gguf", ".mmproj.gguf")
    return _build_atomically(
        target,
        lambda tmp: build_mmproj(tmp, text_n_embd=spec.n_embd, kind=kind, seed=spec.seed),
    )


def build_cached(target: Path, **build: Any) -> Path:
    """``build_model(target, **build)`` unless ``target`` exists; safe against racing builds."""
    return _build_atomically(target, lambda tmp: build_model(tmp, **build))


def _build_atomically(target: Path, build: Callable[[str], object]) -> Path:
    """Run ``build(tmp)`` and rename the result to ``target`` unless it exists."""
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    # Build beside the target and rename: a racing process builds the same
    # bytes, and os.replace is atomic, so readers never see a partial file.
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".building-", suffix=".gguf")
    os.close(fd)
    try:
        build(tmp)
        os.chmod(tmp, 0o644)  # mkstemp makes it private; the cache is shared
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return target

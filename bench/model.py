"""The benchmark model: built once with the package's builder, cached by its inputs."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from pathlib import Path

from bench.config import CACHE_DIR, Shape
from jupyter_superfluid.builtin_models import tiny_gguf as testmodels
from jupyter_superfluid.builtin_models.templates import CHATML
from jupyter_superfluid.builtin_models.tiny_gguf import EOS_TOKEN, Vocab, build_cached, vocabulary

MODEL_ID = "bench"


def model_path(shape: Shape, cache_dir: Path = CACHE_DIR) -> Path:
    """The cached GGUF of ``shape``, built on first use (atomically, so racing runs agree)."""
    blob = json.dumps(asdict(shape), sort_keys=True).encode()
    builder = Path(testmodels.__file__).read_bytes()
    # With fill-in-the-middle tokens (appended last: the other ids and weights are the
    # same), so the completions scenario can compare /v1/completions with /infill.
    digest = hashlib.sha256(blob + builder + CHATML.encode() + b"fim").hexdigest()[:12]
    target = cache_dir / "models" / f"bench-{shape.n_layer}x{shape.n_embd}-{digest}.gguf"
    return build_cached(
        target,
        chat_template=CHATML,
        n_layer=shape.n_layer,
        n_embd=shape.n_embd,
        n_head=shape.n_head,
        context_length=shape.context_length,
        seed=shape.seed,
        f16=shape.f16,
        name=MODEL_ID,
        vocab=Vocab(fim=True),
    )


def eos_id() -> int:
    """The id of ``<|im_end|>`` (banned to fix output lengths, favoured to end turns)."""
    return vocabulary()[0].index(EOS_TOKEN)


def eos_logit_bias(bias: float) -> dict[str, float]:
    """``logit_bias`` on the end-of-turn token (OpenAI shape: string ids); -100 bans it."""
    return {str(eos_id()): bias}


def ascii_only() -> dict[str, float]:
    """``logit_bias`` banning the byte tokens 0x80-0xFF, so replies are ASCII text.

    A random model's bytes are mostly invalid UTF-8, which no real model's reply is:
    llama-server streams no id for a token that ends inside a character, a client of
    it can only re-tokenize the text, where the invalid bytes arrive as U+FFFD, and
    the remote's cached prefix then stops at the first of them. Real replies are valid
    UTF-8, so the benchmarks keep replies to ASCII, for every server alike.
    """
    return {str(b): -100.0 for b in range(0x80, 0x100)}  # byte b is token id b

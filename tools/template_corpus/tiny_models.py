"""Tiny random models that carry any chat template and tokenize like the real model.

The template's markers (found by ``syntax.vocabulary``) become control tokens of the
model's vocabulary, so each is one token as in the real GGUF, and its turn ends become
the end-of-generation tokens, so generations stop where the real model's would.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict
from pathlib import Path

from jupyter_superfluid.builtin_models.tiny_gguf import (
    BOS_TOKEN,
    BUILDER_VERSION,
    EOS_TOKEN,
    Vocab,
    build_cached,
)
from jupyter_superfluid.chat.codec import ChatCodec
from tools.template_corpus.vocabulary import template_tokens


def template_vocab(source: str) -> tuple[ChatCodec, Vocab]:
    """(the ``ChatCodec`` of ``source``, the ``Vocab`` of a tiny model carrying it)."""
    # Templates that write eos_token/bos_token get "</s>"/"<s>", as most real models have.
    codec = ChatCodec(source, bos_token=BOS_TOKEN, eos_token="</s>")
    found = template_tokens(codec)
    vocab = Vocab(
        special_tokens=found.special,
        eos_token=found.eos or EOS_TOKEN,
        eog_tokens=tuple(t for t in found.eog if t != found.eos),
    )
    return codec, vocab


def build_template_model(
    source: str, cache_dir: Path, *, name: str, context_length: int = 4096, seed: int = 0
) -> Path:
    """A tiny random model carrying the chat template ``source`` (built once, cached)."""
    _, vocab = template_vocab(source)
    blob = json.dumps([BUILDER_VERSION, source, asdict(vocab), context_length, seed, name])
    digest = hashlib.sha256(blob.encode() + Path(__file__).read_bytes()).hexdigest()[:12]
    return build_cached(
        Path(cache_dir) / f"{re.sub(r'[^A-Za-z0-9._-]', '_', name)}-{digest}.gguf",
        chat_template=source,
        context_length=context_length,
        seed=seed,
        name=name,
        vocab=vocab,
    )

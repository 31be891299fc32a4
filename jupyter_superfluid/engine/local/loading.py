"""What loading a model sets up beside its context: its info, its projector, its disk tier.

The disk tier's identity names everything a saved KV state is valid for (this file, this
llama.cpp, this KV layout), so a state is never restored into another model.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from jupyter_superfluid.engine.base import ModelInfo, ModelLoadError
from jupyter_superfluid.engine.local.kv.disk_tier import DiskTier
from jupyter_superfluid.engine.local.media import MediaProjector
from jupyter_superfluid.engine.local.native import Vocab, meta_string, metadata_digest

log = logging.getLogger(__name__)


def disk_tier(
    kv_dir: Path,
    model_id: str,
    path: Path,
    model: Any,
    flash_attention: bool | None,
    mmproj: str | Path | None,
    max_bytes: int,
    *,
    kv_streams: int = 1,
) -> DiskTier | None:
    """The model's disk tier; None (and a warning) when its directory cannot be used.

    ``kv_streams``: the context's KV streams (1: unified), which a saved state lists.
    """
    identity = {**_identity(path, model, flash_attention, mmproj), "kv_streams": kv_streams}
    try:
        return DiskTier(kv_dir, model_id, identity, max_bytes)
    except OSError as err:  # a read-only or full disk costs warmth, never the model
        log.warning("no KV disk tier for %s under %s: %s", model_id, kv_dir, err)
        return None


def _identity(
    path: Path, model: Any, flash_attention: bool | None, mmproj: str | Path | None
) -> dict[str, Any]:
    """What a saved KV state is only valid for: this file, this llama.cpp, this KV layout.

    The file's mtime is part of it, so a model file replaced in place (same
    path, size and metadata, other weights) never gets another's states.
    """
    import llama_cpp

    stat = path.stat()
    projector = Path(mmproj).stat() if mmproj is not None else None
    return {
        "format": 1,
        "llama_cpp": llama_cpp.__version__,
        "model": str(path.resolve()),
        "model_bytes": stat.st_size,
        "model_mtime_ns": stat.st_mtime_ns,
        "metadata": metadata_digest(model),
        "flash_attention": flash_attention,
        "kv_type": "f16",  # the context's default type_k / type_v
        "projector": None if mmproj is None else [str(Path(mmproj).resolve()), projector.st_size],  # type: ignore[union-attr]
    }


def load_projector(path: str | Path, model: Any, threads: int | None) -> MediaProjector:
    """The model's media projector; ModelLoadError for one this engine cannot drive."""
    projector = MediaProjector.load(path, model, threads=threads)
    if projector.uses_mrope:
        projector.close()
        # M-RoPE gives each medium position 2-D coordinates; the worker's
        # batches carry one position per token.
        raise ModelLoadError(f"{path}: projectors that need M-RoPE positions are not supported")
    return projector


def model_info(
    model_id: str,
    path: Path,
    model: Any,
    vocab: Vocab,
    context_size: int,
    projector: MediaProjector | None,
) -> ModelInfo:
    """ModelInfo from the GGUF metadata and the vocabulary."""

    def text(token: int) -> str:
        """A special token's text; empty when the model has none."""
        return vocab.piece(token).decode("utf-8", errors="replace") if token >= 0 else ""

    return ModelInfo(
        id=model_id,
        path=str(path),
        context_size=context_size,
        chat_template=meta_string(model, "tokenizer.chat_template"),
        bos_token=text(vocab.bos),
        eos_token=text(vocab.eos),
        eog_token_ids=vocab.eog_ids,
        n_vocab=vocab.n_tokens,
        fim_tokens=vocab.fim,
        accepts_images=bool(projector and projector.supports_images),
        accepts_audio=bool(projector and projector.supports_audio),
    )

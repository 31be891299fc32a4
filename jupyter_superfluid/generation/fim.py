"""Fill-in-the-middle prompts: ``<FIM_PRE> prefix <FIM_SUF> suffix <FIM_MID>`` as token ids.

The order is PSM, as llama.cpp's ``/infill`` builds it (BOS first when the model adds
one). The three ids come from the model's metadata (``ModelInfo.fim_tokens``: the
``tokenizer.ggml.fim_*_token_id`` keys, read in the engine process), else from the
known spellings in its vocabulary, found by tokenizing them (a remote engine).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence

from jupyter_superfluid.engine.base import Engine
from jupyter_superfluid.generation.prompt_tokens import strip_lead

# Prefix, suffix, middle: Qwen/StarCoder, CodeLlama, DeepSeek.
FIM_SPELLINGS = (
    ("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"),
    ("<fim_prefix>", "<fim_suffix>", "<fim_middle>"),
    ("<PRE>", "<SUF>", "<MID>"),
    ("▁<PRE>", "▁<SUF>", "▁<MID>"),
    ("<｜fim▁begin｜>", "<｜fim▁hole｜>", "<｜fim▁end｜>"),  # noqa: RUF001
)
_found: weakref.WeakKeyDictionary[Engine, tuple[int, int, int] | None] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def fim_tokens(engine: Engine) -> tuple[int, int, int] | None:
    """The model's (prefix, suffix, middle) FIM token ids, or None (blocking: may tokenize)."""
    if engine.info.fim_tokens is not None:
        return engine.info.fim_tokens
    with _lock:
        if engine in _found:
            return _found[engine]
    found = _by_spelling(engine)
    with _lock:
        _found[engine] = found
    return found


def _by_spelling(engine: Engine) -> tuple[int, int, int] | None:
    """The first family of known spellings whose three are control tokens of the model."""
    lead = engine.tokenize("")
    for family in FIM_SPELLINGS:
        ids = [_control_token(engine, text, lead) for text in family]
        if ids[0] is None:
            continue
        if ids[1] is not None and ids[2] is not None:
            return (ids[0], ids[1], ids[2])
    return None


def _control_token(engine: Engine, text: str, lead: list[int]) -> int | None:
    """The id of ``text`` when it is one control token (one token only when parsed special)."""
    special = strip_lead(engine.tokenize(text, special=True), lead)
    if len(special) != 1:
        return None
    return special[0] if strip_lead(engine.tokenize(text, special=False), lead) != special else None


def text_tokens(engine: Engine, text: str) -> list[int]:
    """Token ids of ``text`` as plain text: no BOS, control-token spellings not parsed."""
    return strip_lead(engine.tokenize(text, special=False), engine.tokenize(""))


def fim_prompt(
    engine: Engine, fim: tuple[int, int, int], prefix: Sequence[int], suffix: Sequence[int]
) -> list[int]:
    """``[BOS] <FIM_PRE> prefix <FIM_SUF> suffix <FIM_MID>`` (BOS when the model adds one)."""
    pre, suf, mid = fim
    return [*engine.tokenize(""), pre, *prefix, suf, *suffix, mid]

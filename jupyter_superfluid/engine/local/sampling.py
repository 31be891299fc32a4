"""Per-request sampler chains and incremental token-to-text decoding.

Each request owns one llama.cpp sampler chain (its grammar state and its RNG
are per sequence, which is what keeps concurrent generations independent and a
seeded one reproducible whatever else runs beside it).
"""

from __future__ import annotations

import codecs
import weakref
from typing import Any

import llama_cpp.llama_cpp as L

from jupyter_superfluid.engine.base import EngineError, SamplingParams
from jupyter_superfluid.engine.local.native import Vocab, log_errors_since, log_mark


class Sampler:
    """An owned ``llama_sampler`` chain; freed once, by ``free()`` or at collection."""

    def __init__(self, ptr: Any) -> None:
        self.ptr = ptr
        self._finalizer = weakref.finalize(self, L.llama_sampler_free, ptr)

    def sample(self, ctx: Any, index: int) -> int:
        """Sample (and accept) a token from output ``index`` of the last decode."""
        return int(L.llama_sampler_sample(self.ptr, ctx, index))

    def free(self) -> None:
        """Release the chain (idempotent)."""
        self._finalizer()


def build_sampler(vocab: Vocab, params: SamplingParams) -> Sampler:
    """The chain for ``params``: grammar, then top-p, temperature, dist(seed) or greedy."""
    chain = L.llama_sampler_chain_init(L.llama_sampler_chain_default_params())
    sampler = Sampler(chain)  # owns every stage added below
    bias = _logit_bias(vocab, getattr(params, "logit_bias", None))
    if bias is not None:
        L.llama_sampler_chain_add(chain, bias)
    if params.grammar is not None:
        mark = log_mark()
        grammar = L.llama_sampler_init_grammar(vocab.ptr, params.grammar.encode(), b"root")
        if not grammar:
            sampler.free()
            detail = "; ".join(log_errors_since(mark)) or "parse error"
            raise EngineError(f"invalid grammar: {detail}")
        # Grammar first: it masks the full candidate list, so any later stage
        # only ever sees tokens the grammar allows.
        L.llama_sampler_chain_add(chain, grammar)
    if params.temperature <= 0:
        L.llama_sampler_chain_add(chain, L.llama_sampler_init_greedy())
        return sampler
    if params.top_p < 1.0:
        L.llama_sampler_chain_add(chain, L.llama_sampler_init_top_p(params.top_p, 1))
    L.llama_sampler_chain_add(chain, L.llama_sampler_init_temp(params.temperature))
    seed = L.LLAMA_DEFAULT_SEED if params.seed is None else params.seed % 2**32
    if params.seed is not None and seed == L.LLAMA_DEFAULT_SEED:
        seed -= 1  # llama.cpp reads 0xFFFFFFFF as "random"; keep a given seed fixed
    L.llama_sampler_chain_add(chain, L.llama_sampler_init_dist(seed))
    return sampler


def _logit_bias(vocab: Vocab, bias: Any) -> Any:
    """A logit-bias stage from ``{token_id: bias}`` (OpenAI style; -100 bans), or None.

    ``SamplingParams`` has no such field yet; a subclass or a later version
    that carries ``logit_bias`` gets it honoured here.
    """
    if not bias:
        return None
    items = bias.items() if hasattr(bias, "items") else bias
    pairs = [(int(token), float(value)) for token, value in items]
    if any(not 0 <= token < vocab.n_tokens for token, _ in pairs):
        raise EngineError("logit_bias names a token outside the vocabulary")
    array = (L.llama_logit_bias * len(pairs))()
    for i, (token, value) in enumerate(pairs):
        array[i].token = token  # type: ignore[assignment]  # ctypes converts
        array[i].bias = float("-inf") if value <= -100 else value
    return L.llama_sampler_init_logit_bias(vocab.n_tokens, len(pairs), array)


class TextDecoder:
    """Turns token pieces into text, holding back bytes of an unfinished UTF-8 char."""

    def __init__(self, vocab: Vocab) -> None:
        self._vocab = vocab
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def feed(self, token: int, *, final: bool = False) -> str:
        """Text completed by ``token``; ``final`` flushes held bytes as U+FFFD."""
        return self._utf8.decode(self._vocab.piece(token), final=final)

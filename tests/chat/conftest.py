"""Fixtures for the chat tests: llama.cpp itself as GBNF parser and grammar matcher.

llama.cpp parses a grammar only against a vocabulary, so this writes a vocabulary-only
GGUF (byte-level BPE, every byte a token, the ChatML/Qwen special tokens) and loads it
with ``vocab_only``. A text matches a grammar when, token by token, the grammar sampler
leaves each token's logit finite, and then allows end-of-generation.
"""

from __future__ import annotations

import ctypes
import math
from pathlib import Path

import gguf
import llama_cpp
import pytest

from jupyter_superfluid.builtin_models.templates import SPECIAL_TOKENS


def _byte_symbols() -> list[str]:
    """GPT-2's byte-to-unicode table: the printable stand-in for each byte."""
    printable = [*range(33, 127), *range(161, 173), *range(174, 256)]
    extra = iter(range(256, 512))
    return [chr(b) if b in printable else chr(next(extra)) for b in range(256)]


def write_vocab_gguf(path: Path) -> Path:
    """Write a weightless GGUF that llama.cpp can load with vocab_only."""
    symbols = _byte_symbols()
    # llama.cpp refuses a gpt2 tokenizer without merges; one merge whose pieces exist.
    tokens = [*symbols, "ab", *SPECIAL_TOKENS]
    types = [gguf.TokenType.NORMAL] * (len(symbols) + 1)
    types += [gguf.TokenType.CONTROL] * len(SPECIAL_TOKENS)
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_context_length(256)
    writer.add_embedding_length(64)
    writer.add_feed_forward_length(128)
    writer.add_block_count(1)
    writer.add_head_count(2)
    writer.add_head_count_kv(2)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(["a b"])
    writer.add_eos_token_id(tokens.index("<|im_end|>"))
    writer.add_bos_token_id(tokens.index("<|endoftext|>"))
    writer.add_add_bos_token(False)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


class GrammarChecker:
    """llama.cpp's grammar parser and sampler over a vocabulary-only model."""

    def __init__(self, gguf_path: Path) -> None:
        llama_cpp.llama_backend_init()
        params = llama_cpp.llama_model_default_params()
        params.vocab_only = True
        self._model = llama_cpp.llama_model_load_from_file(str(gguf_path).encode(), params)
        if not self._model:
            raise RuntimeError(f"llama.cpp could not load {gguf_path}")
        self._vocab = llama_cpp.llama_model_get_vocab(self._model)
        self.eos = llama_cpp.llama_vocab_eos(self._vocab)

    def close(self) -> None:
        """Free the model."""
        llama_cpp.llama_model_free(self._model)

    def parses(self, grammar: str) -> bool:
        """True when llama.cpp's grammar parser accepts the grammar (root rule "root")."""
        sampler = llama_cpp.llama_sampler_init_grammar(self._vocab, grammar.encode(), b"root")
        if not sampler:
            return False
        llama_cpp.llama_sampler_free(sampler)
        return True

    def tokenize(self, text: str) -> list[int]:
        """Token ids for text, special tokens parsed as such."""
        data = text.encode()
        buf = (llama_cpp.llama_token * (len(data) + 8))()
        n = llama_cpp.llama_tokenize(self._vocab, data, len(data), buf, len(buf), False, True)
        assert n >= 0, "token buffer too small"
        return list(buf[:n])

    def _allowed(self, sampler: llama_cpp.llama_sampler_p, token: int) -> bool:
        data = (llama_cpp.llama_token_data * 1)(llama_cpp.llama_token_data(token, 0.0, 0.0))
        arr = llama_cpp.llama_token_data_array(
            data=ctypes.cast(data, llama_cpp.llama_token_data_p), size=1, selected=-1, sorted=False
        )
        llama_cpp.llama_sampler_apply(sampler, ctypes.byref(arr))
        return math.isfinite(data[0].logit)

    def matches(self, grammar: str, text: str) -> bool:
        """True when the grammar generates exactly ``text`` (then end of generation)."""
        sampler = llama_cpp.llama_sampler_init_grammar(self._vocab, grammar.encode(), b"root")
        assert sampler, "grammar does not parse"
        try:
            for token in self.tokenize(text):
                if not self._allowed(sampler, token):
                    return False
                llama_cpp.llama_sampler_accept(sampler, token)
            return self._allowed(sampler, self.eos)
        finally:
            llama_cpp.llama_sampler_free(sampler)


@pytest.fixture(scope="session")
def grammar_checker(tmp_path_factory: pytest.TempPathFactory):
    """llama.cpp's grammar parser and matcher over a vocabulary-only GGUF."""
    path = write_vocab_gguf(tmp_path_factory.mktemp("vocab") / "vocab.gguf")
    checker = GrammarChecker(path)
    yield checker
    checker.close()

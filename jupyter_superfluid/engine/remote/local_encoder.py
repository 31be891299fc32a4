"""Prompt texts tokenized here, from the model's own vocabulary, once the remote agrees.

A remote turn sends the new message's token ids, and asking the remote for them
(``/tokenize``) is one more round trip into its API server before every generation. The
same ids can be made here from the same vocabulary:

- vLLM: the Hugging Face ``tokenizers`` library (the ``vllm`` extra) encodes with the
  ``tokenizer.json`` that vLLM's own tokenizer is built from (``from_tokenizer_json``).
- llama-server: llama.cpp's own tokenizer over a vocabulary-only load of the GGUF the
  remote serves (``from_gguf``: its metadata and vocabulary, no weights), the file the
  remote names in ``/props`` when it is readable here, else one named in the spec.

Here is only trusted what is checked: ``agrees`` compares a probe text's ids with the
remote's answer for it (specials, digits, spaces, newlines, non-Latin text, an emoji), and
the dialect asks it again whenever it re-reads the model, so a remote restarted with
another vocabulary falls back to ``/tokenize`` by itself.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path

from jupyter_superfluid.engine.base import EngineError

log = logging.getLogger(__name__)

# What a tokenizer is likeliest to split differently: specials in running text, runs of
# digits and spaces, newlines, accents, CJK, an emoji (several bytes, one character).
_PROBE_TEXT = (
    "Hello, world!  12345 6789\n\n\tdef f(x):\n        return x**2  # Ünïcödé  "
    "naïve café — 日本語のテキスト, русский текст 🙂🚀 ''' \"quoted\" 0.25e-3\r\n"
)
_PROBED_ADDED = 32  # added tokens (specials) spelled in the probe, each once


class LocalEncoder:
    """Token ids made here by ``encode(text, special)``, used while the remote agrees."""

    def __init__(
        self,
        encode: Callable[[str, bool], list[int]],
        specials: Sequence[str],
        *,
        added: Sequence[str] = (),
        close: Callable[[], None] | None = None,
    ) -> None:
        self._encode = encode
        self._close = close
        spellings = dict.fromkeys([*specials, *added[:_PROBED_ADDED]])  # once each, in order
        self.probe = "".join(f"{s}{_PROBE_TEXT}" for s in spellings if s) + _PROBE_TEXT

    @classmethod
    def from_tokenizer_json(cls, path: Path, specials: Sequence[str]) -> LocalEncoder | None:
        """The encoder of ``path`` (a ``tokenizer.json``); None without ``tokenizers`` or file.

        Control-token spellings are always parsed (as vLLM does), whatever ``special`` says.
        """
        try:
            from tokenizers import Tokenizer  # the ``vllm`` extra
        except ImportError:
            log.info("tokenizers is not installed: prompt texts go to the remote's /tokenize")
            return None
        try:
            tokenizer = Tokenizer.from_file(str(path))
        except Exception as err:  # the library's own error types vary by version
            log.warning("cannot load %s for local tokenizing (%s): using /tokenize", path, err)
            return None
        added = [t.content for t in tokenizer.get_added_tokens_decoder().values()]

        def encode(text: str, special: bool) -> list[int]:
            return list(tokenizer.encode(text, add_special_tokens=True).ids)

        return cls(encode, specials, added=added)

    @classmethod
    def from_gguf(cls, path: Path, specials: Sequence[str]) -> LocalEncoder | None:
        """llama.cpp's encoder over the vocabulary of the GGUF at ``path``; None if unreadable."""
        from jupyter_superfluid.engine.local import native  # llama.cpp, loaded only here

        try:
            vocab = native.load_vocab(path)
        except EngineError as err:
            log.warning("cannot read %s for local tokenizing (%s): using /tokenize", path, err)
            return None

        def encode(text: str, special: bool) -> list[int]:
            return vocab.tokenize(text, add_special=True, parse_special=special)

        return cls(encode, specials, added=vocab.control_spellings(), close=vocab.free)

    def encode(self, text: str, *, special: bool = True) -> list[int]:
        """Token ids of ``text``, the vocabulary's own specials (a BOS) added as it asks."""
        return self._encode(text, special)

    def agrees(self, remote: Callable[[str], Sequence[int]]) -> bool:
        """Whether ``remote`` (the remote's ``/tokenize``) gives the probe this encoder's ids."""
        theirs = [int(t) for t in remote(self.probe)]
        if theirs == self.encode(self.probe):
            return True
        log.warning("the local tokenizer disagrees with the remote's: using /tokenize")
        return False

    def close(self) -> None:
        """Free what the encoder holds (llama.cpp's vocabulary); encode no more after."""
        if self._close is not None:
            self._close()
            self._close = None

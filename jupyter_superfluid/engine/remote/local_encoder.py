"""Prompt texts tokenized here, from the model's ``tokenizer.json``, once the remote agrees.

A vLLM turn sends the new message's token ids, and asking vLLM for them (``/tokenize``) is
one more round trip into its API server before every generation. The Hugging Face
``tokenizers`` library (the ``vllm`` extra) encodes with the same ``tokenizer.json`` that
vLLM's own tokenizer is built from, so the ids can be made here instead. Here is only
trusted what is checked: ``agrees`` compares a probe text's ids with the remote's
answer for it (specials, digits, spaces, newlines, non-Latin text, an emoji), and the
dialect asks it again whenever it re-reads the model, so a remote restarted with another
tokenizer falls back to ``/tokenize`` by itself.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

# What a tokenizer is likeliest to split differently: specials in running text, runs of
# digits and spaces, newlines, accents, CJK, an emoji (several bytes, one character).
_PROBE_TEXT = (
    "Hello, world!  12345 6789\n\n\tdef f(x):\n        return x**2  # Ünïcödé  "
    "naïve café — 日本語のテキスト, русский текст 🙂🚀 ''' \"quoted\" 0.25e-3\r\n"
)
_PROBED_ADDED = 32  # added tokens (specials) spelled in the probe, each once


class LocalEncoder:
    """A ``tokenizers.Tokenizer`` over one ``tokenizer.json``, used while the remote agrees."""

    def __init__(self, tokenizer: Any, specials: Sequence[str]) -> None:
        self._tokenizer = tokenizer
        added = [t.content for t in tokenizer.get_added_tokens_decoder().values()]
        spellings = dict.fromkeys([*specials, *added[:_PROBED_ADDED]])  # once each, in order
        self.probe = "".join(f"{s}{_PROBE_TEXT}" for s in spellings if s) + _PROBE_TEXT

    @classmethod
    def load(cls, path: Path, specials: Sequence[str]) -> LocalEncoder | None:
        """The encoder of ``path`` (a ``tokenizer.json``); None without ``tokenizers`` or file."""
        try:
            from tokenizers import Tokenizer  # the ``vllm`` extra
        except ImportError:
            log.info("tokenizers is not installed: prompt texts go to the remote's /tokenize")
            return None
        try:
            return cls(Tokenizer.from_file(str(path)), specials)
        except Exception as err:  # the library's own error types vary by version
            log.warning("cannot load %s for local tokenizing (%s): using /tokenize", path, err)
            return None

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``, the tokenizer's own specials (a BOS) added as it asks."""
        return list(self._tokenizer.encode(text, add_special_tokens=True).ids)

    def agrees(self, remote: Callable[[str], Sequence[int]]) -> bool:
        """Whether ``remote`` (the remote's ``/tokenize``) gives the probe this encoder's ids."""
        theirs = [int(t) for t in remote(self.probe)]
        if theirs == self.encode(self.probe):
            return True
        log.warning("the local tokenizer disagrees with the remote's: using /tokenize")
        return False

"""Prompt texts to token ids piece by piece, as one prompt: the model's BOS once, first.

A prompt is tokenized in pieces (each message's rendering, the generation prompt, what
the template writes after a reply), so that a stored session's tokens can be kept and
only the new pieces added. An engine's ``tokenize`` puts a BOS first when the model asks
for one (Llama 3, Gemma and Mistral GGUFs do), which is right for a whole prompt and
wrong for every piece after the first. Here a piece is tokenized without it, and a
prompt begins with exactly one: the template's own BOS text when it writes one (the
engine's added BOS is dropped, as llama.cpp's server drops the template's), else the
engine's.

Pieces are not remembered here: a remote engine remembers the texts it tokenized (each
is a round trip over the network), and a turn's call into the engine process is also
how a turn that follows a crash finds the process gone and waits for its restart. Only
what the template itself writes (its generation prompt, a marker) is, once per model.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence

from jupyter_superfluid.engine.base import Engine

CONSTANTS_REMEMBERED = 64  # per model: generation prompts (per template arguments), markers


def strip_lead(tokens: list[int], lead: Sequence[int]) -> list[int]:
    """``tokens`` without the ``lead`` (BOS) the tokenizer put first."""
    n = len(lead)
    return tokens[n:] if n and tokens[:n] == list(lead) else tokens


class PromptTokens:
    """One model's tokenizer as prompts use it: pieces without the BOS."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._lead: tuple[int, ...] | None = None
        self._constants: dict[str, tuple[int, ...]] = {}
        self._lock = threading.Lock()

    @property
    def lead(self) -> tuple[int, ...]:
        """What the tokenizer puts before any text (the BOS, or nothing); blocking once."""
        if self._lead is None:
            self._lead = tuple(self._engine.tokenize(""))
        return self._lead

    def piece(self, text: str) -> list[int]:
        """Token ids of ``text`` inside a prompt, without the BOS (blocking)."""
        if not text:
            return []
        return strip_lead(self._engine.tokenize(text), self.lead)

    def constant(self, text: str) -> list[int]:
        """``piece(text)`` for a text the template writes itself, remembered (blocking once)."""
        with self._lock:
            known = self._constants.get(text)
        if known is None:
            known = tuple(self.piece(text))
            with self._lock:
                if len(self._constants) >= CONSTANTS_REMEMBERED:
                    self._constants.clear()
                self._constants[text] = known
        return list(known)

    def start(self, tokens: list[int]) -> list[int]:
        """``tokens`` as the beginning of a prompt: led by the BOS once, where there is one."""
        lead = list(self.lead)
        if not lead or tokens[: len(lead)] == lead:
            return tokens
        return lead + tokens

    def prompt(self, text: str) -> list[int]:
        """Token ids of a whole prompt ``text``: the BOS once, then the text's (blocking)."""
        return self.start(self.piece(text))


_of: weakref.WeakKeyDictionary[Engine, PromptTokens] = weakref.WeakKeyDictionary()
_of_lock = threading.Lock()


def prompt_tokens(engine: Engine) -> PromptTokens:
    """The prompt tokenizer of ``engine`` (one per engine: its BOS is found once)."""
    with _of_lock:
        found = _of.get(engine)
        if found is None:
            found = _of[engine] = PromptTokens(engine)
        return found

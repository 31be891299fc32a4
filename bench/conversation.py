"""Conversation material: seeded text of an exact token length, and message lists.

Histories are made of user messages of plain English words (each conversation
its own seed, so no two share a prefix beyond the template's) and the
assistant replies the server generated. ``Conversation`` keeps them as
messages, so the same conversation can be resent whole to any server.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import llama_cpp

INSTRUCTIONS = "You are a careful assistant. Answer briefly."
_WORD_TEXT = (
    "the of and to in is you that it he was for on are as with his they at be this have "
    "from or one had by word but not what all were we when your can said there use an "
    "each which she do how their if will up other about out many then them these so some "
    "her would make like him into time has look two more write go see number no way could "
    "people my than first water been call who oil its now find long down day did get come "
    "made may part notebook kernel server model token cache branch session stream python "
    "jupyter cell output input history memory thread batch prompt answer question context"
)
_WORDS = _WORD_TEXT.split()


class Tokenizer:
    """Counts tokens with the bench model's own vocabulary (loaded vocab-only)."""

    def __init__(self, model: Path) -> None:
        self._llama = llama_cpp.Llama(str(model), vocab_only=True, verbose=False)

    def count(self, text: str) -> int:
        """Tokens ``text`` encodes to (no special tokens)."""
        return len(self._llama.tokenize(text.encode(), add_bos=False, special=False))

    def text(self, n_tokens: int, seed: int) -> str:
        """Seeded English-like words encoding to about ``n_tokens`` tokens (never more)."""
        rng = random.Random(seed)
        words = [rng.choice(_WORDS) for _ in range(n_tokens)]  # a word is >= 1 token
        tokens = self._llama.tokenize(" ".join(words).encode(), add_bos=False, special=False)
        text = self._llama.detokenize(tokens[:n_tokens]).decode("utf-8", errors="ignore")
        while self.count(text) > n_tokens:
            text = text[:-1]
        return text.strip()


@dataclass
class Conversation:
    """One conversation: instructions and alternating messages, plus its stored tip."""

    name: str
    instructions: str = INSTRUCTIONS
    messages: list[dict[str, str]] = field(default_factory=list)
    response_id: str | None = None  # the stored response its tip is (superfluid)
    tokens: int = 0  # prompt + output tokens of the tip, as the server counted them

    def add(self, user: str, assistant: str) -> None:
        """Append one finished turn."""
        self.messages += [
            {"role": "user", "content": user},
            {"role": "assistant", "content": assistant},
        ]

    def copy(self, name: str) -> Conversation:
        """An independent copy (the same turns so far)."""
        return Conversation(name, self.instructions, list(self.messages), self.response_id)

    def chat_messages(self, new_user: str, nonce: str = "") -> list[dict[str, str]]:
        """The whole conversation plus ``new_user``, as chat completions messages.

        ``nonce`` leads the system text, so no prefix cache can serve the
        resent conversation: the request costs what it would on a cold server.
        """
        system = {"role": "system", "content": f"{nonce}{self.instructions}"}
        return [system, *self.messages, {"role": "user", "content": new_user}]

    def responses_input(self, new_user: str) -> list[dict[str, Any]]:
        """The whole conversation plus ``new_user``, as Responses input items."""
        items: list[dict[str, Any]] = [
            {"type": "message", "role": m["role"], "content": m["content"]} for m in self.messages
        ]
        return [*items, {"type": "message", "role": "user", "content": new_user}]


def nonce(tag: str) -> str:
    """A short unique line to lead a system text with (defeats prefix caches)."""
    return f"[run {tag} {random.getrandbits(40):010x}] "

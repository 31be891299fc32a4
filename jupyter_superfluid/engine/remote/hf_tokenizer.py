"""A Hugging Face tokenizer directory read with the standard library: template, specials, bytes.

A remote that does not serve its chat template (vLLM) is given its model's tokenizer
files as a local path. From them superfluid takes what it renders and decodes with —
never importing ``transformers`` or ``torch`` in the server:

- ``tokenizer_config.json``: ``chat_template`` (a string, or the ``default`` of a list of
  named templates; else the file ``chat_template.jinja`` beside it), ``bos_token`` and
  ``eos_token`` (strings or added-token objects);
- ``tokenizer.json``: each id's bytes, for decoding generated ids incrementally
  (``TokenBytes``): byte-level BPE (GPT-2, Llama 3, Qwen) or SentencePiece-style pieces
  (``▁`` for a space, ``<0xNN>`` byte fallback); added tokens are their own text.
"""

from __future__ import annotations

import codecs
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CONFIG_FILE = "tokenizer_config.json"
TOKENIZER_FILE = "tokenizer.json"
TEMPLATE_FILE = "chat_template.jinja"


class TokenizerFilesError(ValueError):
    """Tokenizer files that cannot give what a model needs; the message names what is missing."""


@dataclass(frozen=True)
class TokenizerFiles:
    """What a model's tokenizer directory gives: its template, specials and token bytes."""

    path: Path
    chat_template: str
    bos_token: str
    eos_token: str
    token_bytes: TokenBytes | None  # None: a decoder this reader does not know


def read_tokenizer(path: str | Path) -> TokenizerFiles:
    """Read the tokenizer directory ``path``; TokenizerFilesError names what is missing."""
    root = Path(path).expanduser()
    config_file = root / CONFIG_FILE
    try:
        config = json.loads(config_file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise TokenizerFilesError(f"cannot read {config_file}: {err}") from err
    template = _template(config, root)
    if not template:
        raise TokenizerFilesError(
            f"{root} has no chat template (no chat_template in {CONFIG_FILE}, no {TEMPLATE_FILE})"
        )
    tokenizer = root / TOKENIZER_FILE
    data = json.loads(tokenizer.read_text(encoding="utf-8")) if tokenizer.is_file() else None
    return TokenizerFiles(
        root,
        template,
        _token_text(config.get("bos_token")),
        _token_text(config.get("eos_token")),
        TokenBytes.from_tokenizer_json(data) if data else None,
    )


def _template(config: dict[str, Any], root: Path) -> str:
    """The default chat template of a tokenizer config (or of its ``.jinja`` file)."""
    found = config.get("chat_template")
    if isinstance(found, list):
        named = {t.get("name"): t.get("template") for t in found if isinstance(t, dict)}
        found = named.get("default")
    if isinstance(found, str) and found:
        return found
    jinja = root / TEMPLATE_FILE
    return jinja.read_text(encoding="utf-8") if jinja.is_file() else ""


def _token_text(token: Any) -> str:
    """A special token's text, given as a string or an added-token object."""
    if isinstance(token, dict):
        return str(token.get("content") or "")
    return token if isinstance(token, str) else ""


def _byte_level_alphabet() -> dict[str, int]:
    """GPT-2's printable stand-in of each byte, inverted: character → byte."""
    visible = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    chars, extra = {}, 0
    for b in range(256):
        if b in visible:
            chars[chr(b)] = b
        else:
            chars[chr(256 + extra)] = b
            extra += 1
    return chars


class TokenBytes:
    """Each token id's bytes, from a ``tokenizer.json``."""

    def __init__(self, pieces: dict[int, bytes]) -> None:
        self._pieces = pieces

    @classmethod
    def from_tokenizer_json(cls, data: dict[str, Any]) -> TokenBytes | None:
        """The bytes of every token of ``data``, None for a decoder not known here."""
        model, decoder = data.get("model") or {}, data.get("decoder") or {}
        vocab = model.get("vocab") or {}
        if isinstance(vocab, list):  # Unigram: [[piece, score], ...] by id
            vocab = {piece: i for i, (piece, _score) in enumerate(vocab)}
        kinds = {d.get("type") for d in decoder.get("decoders", [decoder])}
        if "ByteLevel" in kinds:
            alphabet = _byte_level_alphabet()
            if not all(c in alphabet for piece in vocab for c in piece):
                return None
            pieces = {int(i): bytes(alphabet[c] for c in p) for p, i in vocab.items()}
        elif kinds & {"Metaspace", "Replace"} or "ByteFallback" in kinds:
            pieces = {int(i): _sentencepiece_bytes(p) for p, i in vocab.items()}
        else:
            return None
        for added in data.get("added_tokens") or ():
            pieces[int(added["id"])] = str(added["content"]).encode()
        return cls(pieces)

    @property
    def size(self) -> int:
        """The vocabulary's size (its largest id plus one)."""
        return max(self._pieces, default=-1) + 1

    def piece(self, token: int) -> bytes:
        """The bytes of ``token`` (none for an id the vocabulary lacks)."""
        return self._pieces.get(token, b"")

    def decode(self, tokens: list[int]) -> str:
        """The text of ``tokens`` (invalid UTF-8 as U+FFFD)."""
        return b"".join(self.piece(t) for t in tokens).decode("utf-8", errors="replace")

    def decoder(self) -> IncrementalText:
        """A fresh incremental decoder over these bytes."""
        return IncrementalText(self)


def _sentencepiece_bytes(piece: str) -> bytes:
    """A SentencePiece piece's bytes: ``<0xNN>`` is that byte, ``▁`` a space."""
    if len(piece) == 6 and piece.startswith("<0x") and piece.endswith(">"):
        try:
            return bytes([int(piece[3:5], 16)])
        except ValueError:
            pass
    return piece.replace("\u2581", " ").encode()


class IncrementalText:
    """Turns generated ids into text, holding back the bytes of an unfinished character."""

    def __init__(self, token_bytes: TokenBytes) -> None:
        self._bytes = token_bytes
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def feed(self, token: int, *, final: bool = False) -> str:
        """Text completed by ``token``; ``final`` flushes held bytes as U+FFFD."""
        return self._utf8.decode(self._bytes.piece(token), final=final)

"""Prompt texts tokenized here from the GGUF a real llama-server serves, with its own ids."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from jupyter_superfluid.builtin_models.tiny_gguf import ensure_builtin
from jupyter_superfluid.engine.base import EngineError
from jupyter_superfluid.engine.local import native
from jupyter_superfluid.engine.remote.llama_server import LlamaServerEngine
from jupyter_superfluid.engine.remote.local_encoder import LocalEncoder
from jupyter_superfluid.models.registry import parse_spec

from .helpers import REMOTE_KEY, RemoteServer

TEXTS = [
    "<|im_start|>user\nhé, the sun<|im_end|>\n<|im_start|>assistant\n",
    "  12345 digits\tand tabs\n\n日本語 🙂",
    "<|im_end|> as plain text",
]


def tokenize_requests(engine: LlamaServerEngine) -> list[str]:
    """The ``/tokenize`` requests the engine sends from now on."""
    sent: list[str] = []

    def seen(request: httpx.Request) -> None:
        if request.url.path == "/tokenize":
            sent.append(request.url.path)

    engine._client.event_hooks["request"].append(seen)
    return sent


def remote_ids(remote: RemoteServer, text: str, special: bool) -> list[int]:
    body = {"content": text, "add_special": True, "parse_special": special}
    headers = {"Authorization": f"Bearer {REMOTE_KEY}"}
    return httpx.post(remote.url + "/tokenize", json=body, headers=headers).json()["tokens"]


def connect(remote: RemoteServer, **options) -> LlamaServerEngine:
    return LlamaServerEngine.connect("m", remote.url, api_key=REMOTE_KEY, **options)


def test_the_served_gguf_tokenizes_here_with_the_remotes_own_ids(remote_chatml: RemoteServer):
    engine = connect(remote_chatml)
    try:
        assert engine.local_tokenizing  # /props named a file readable here; the probe agreed
        sent = tokenize_requests(engine)
        for special in (True, False):
            ours = [engine.tokenize(text, special=special) for text in TEXTS]
            assert ours == [remote_ids(remote_chatml, text, special) for text in TEXTS]
        assert sent == []  # not one round trip
    finally:
        asyncio.run(engine.close())


def test_a_named_gguf_of_another_vocabulary_falls_back_to_tokenize(
    remote_chatml: RemoteServer, sf_model_cache: Path
):
    other = ensure_builtin("superfluid/tiny-qwen3", sf_model_cache)
    engine = connect(remote_chatml, tokenizer=other)
    try:
        assert not engine.local_tokenizing
        sent = tokenize_requests(engine)
        assert [engine.tokenize(t) for t in TEXTS] == [
            remote_ids(remote_chatml, t, True) for t in TEXTS
        ]
        assert len(sent) == len(TEXTS)
    finally:
        asyncio.run(engine.close())


def test_a_file_that_is_no_gguf_is_no_encoder(tmp_path: Path):
    (tmp_path / "notes.gguf").write_text("not a model")
    assert LocalEncoder.from_gguf(tmp_path / "notes.gguf", ("<s>",)) is None
    assert LocalEncoder.from_gguf(tmp_path / "absent.gguf", ("<s>",)) is None


def test_a_closed_vocabulary_refuses_to_tokenize(sf_model_cache: Path):
    vocab = native.load_vocab(ensure_builtin("superfluid/tiny-chatml", sf_model_cache))
    assert vocab.tokenize("hi", add_special=False, parse_special=True)
    assert "<|im_end|>" in vocab.control_spellings()
    vocab.free()
    vocab.free()  # twice is harmless
    with pytest.raises(EngineError, match="closed"):
        vocab.tokenize("hi", add_special=False, parse_special=True)


def test_llama_server_specs_may_name_the_gguf():
    spec = parse_spec("big=llama-server:http://gpu-box:8080#tokenizer=~/models/big.gguf")
    assert (spec.source, spec.tokenizer) == ("http://gpu-box:8080", "~/models/big.gguf")
    pool = parse_spec("big=llama-server:http://a:1,http://b:2#tokenizer=/m/big.gguf")
    assert (pool.source, pool.tokenizer) == ("http://a:1,http://b:2", "/m/big.gguf")
    assert parse_spec("llama-server:http://a:1").tokenizer is None

"""The vLLM dialect without a server: specs, request bodies, chunks, tokenizer files, salts."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from jupyter_superfluid.builtin_models.tiny_gguf import bytes_to_unicode
from jupyter_superfluid.engine.base import (
    EngineError,
    GenerateRequest,
    GenerationFinished,
    PromptEvaluated,
    SamplingParams,
    TokenGenerated,
)
from jupyter_superfluid.engine.remote.hf_tokenizer import (
    TokenBytes,
    TokenizerFilesError,
    read_tokenizer,
)
from jupyter_superfluid.engine.remote.vllm_completion import DONE, VllmRelay, completion_body
from jupyter_superfluid.generation.cache_salt import CacheSalts
from jupyter_superfluid.models.registry import parse_spec


def test_vllm_specs() -> None:
    spec = parse_spec("big=vllm:http://gpu-box:8000/#tokenizer=/models/qwen3")
    assert (spec.id, spec.kind, spec.source) == ("big", "vllm", "http://gpu-box:8000")
    assert spec.tokenizer == "/models/qwen3"
    assert parse_spec("vllm:http://h:1#tokenizer=/t").id == "h:1"
    with pytest.raises(ValueError, match="tokenizer=PATH"):
        parse_spec("vllm:http://h:1")
    with pytest.raises(ValueError, match="mmproj"):
        parse_spec("vllm:http://h:1#tokenizer=/t;mmproj=p.gguf")


def test_completion_body_sends_ids_sampling_grammar_and_salt() -> None:
    sampling = SamplingParams(0.3, 0.9, 7, 12, 'root ::= "a"', {5: -100.0, 9: 2.5})
    body = completion_body(GenerateRequest((1, 2, 3), sampling, cache_salt="s1"), "m", 100)
    assert body["prompt"] == [1, 2, 3] and body["model"] == "m"
    assert body["stream"] and body["return_token_ids"] and not body["add_special_tokens"]
    assert (body["temperature"], body["top_p"], body["seed"], body["max_tokens"]) == (
        0.3,
        0.9,
        7,
        12,
    )
    assert body["structured_outputs"] == {"grammar": 'root ::= "a"'}
    assert not any(k.startswith("guided_") for k in body)
    assert body["logit_bias"] == {"5": -100.0, "9": 2.5} and body["cache_salt"] == "s1"
    assert body["skip_special_tokens"] is False and body["top_k"] == 0
    plain = completion_body(GenerateRequest((1,)), "m", 50)
    assert plain["max_tokens"] == 50  # no budget: fill the window
    assert not {"seed", "structured_outputs", "logit_bias", "cache_salt"} & set(plain)


def byte_level() -> TokenBytes:
    chars = bytes_to_unicode()
    vocab = {chars[b]: b for b in range(256)}
    data = {
        "model": {"type": "BPE", "vocab": vocab},
        "decoder": {"type": "ByteLevel"},
        "added_tokens": [{"id": 256, "content": "<|im_end|>", "special": True}],
    }
    found = TokenBytes.from_tokenizer_json(data)
    assert found is not None
    return found


def run(relay: VllmRelay, *chunks: dict) -> list:
    async def go() -> list:
        return [e for c in chunks for e in await relay.events(c)]

    return asyncio.run(go())


def test_relay_decodes_ids_and_takes_cached_tokens_from_the_usage_chunk() -> None:
    relay = VllmRelay("http://v", 10, byte_level(), eog=(256,))
    euro = list("€".encode())  # three byte tokens: one character
    events = run(
        relay,
        {"choices": [{"text": "", "token_ids": euro[:2]}]},
        {"choices": [{"text": "€", "token_ids": [euro[2], ord("a")]}]},
        {"choices": [{"text": "", "token_ids": [256], "finish_reason": "stop"}]},
        {
            "choices": [],
            "usage": {"completion_tokens": 5, "prompt_tokens_details": {"cached_tokens": 64}},
        },
        DONE,
    )
    assert events[0] == PromptEvaluated(10, 0)
    tokens = [e for e in events if isinstance(e, TokenGenerated)]
    assert [t.token_id for t in tokens] == [*euro, ord("a")]  # the end of turn left out
    assert "".join(t.text for t in tokens) == "€a" and tokens[0].text == ""
    assert events[-1] == GenerationFinished("stop", 5, cached_tokens=64)


def test_relay_refuses_before_any_token_and_fails_after() -> None:
    relay = VllmRelay("http://v", 3, None, eog=())
    with pytest.raises(EngineError, match="Invalid grammar"):
        run(relay, {"error": {"message": "Invalid grammar", "code": 400}})
    late = VllmRelay("http://v", 3, None, eog=())
    events = run(
        late,
        {"choices": [{"text": "hi", "token_ids": [7, 8]}]},
        {"error": {"message": "boom", "code": 500}},
    )
    assert [e.text for e in events if isinstance(e, TokenGenerated)] == ["", "hi"]
    assert events[-1].reason == "error" and events[-1].code == "engine_unavailable"


def test_tokenizer_files(tmp_path: Path) -> None:
    (tmp_path / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "chat_template": [{"name": "default", "template": "{{ messages }}"}],
                "bos_token": {"content": "<s>"},
                "eos_token": "</s>",
            }
        )
    )
    files = read_tokenizer(tmp_path)
    assert (files.chat_template, files.bos_token, files.eos_token) == (
        "{{ messages }}",
        "<s>",
        "</s>",
    )
    assert files.token_bytes is None  # no tokenizer.json: vLLM's text is used
    (tmp_path / "tokenizer_config.json").write_text("{}")
    with pytest.raises(TokenizerFilesError, match="no chat template"):
        read_tokenizer(tmp_path)
    (tmp_path / "chat_template.jinja").write_text("T")
    assert read_tokenizer(tmp_path).chat_template == "T"


def test_sentencepiece_bytes() -> None:
    vocab = [["<unk>", 0.0], ["\u2581hi", -1.0], ["<0xE2>", 0.0], ["<0x82>", 0.0], ["<0xAC>", 0.0]]
    data = {"model": {"type": "Unigram", "vocab": vocab}, "decoder": {"type": "Metaspace"}}
    pieces = TokenBytes.from_tokenizer_json(data)
    assert pieces is not None and pieces.decode([1, 2, 3, 4]) == " hi€"


def test_cache_salts_are_keyed_stable_and_per_owner(tmp_path: Path) -> None:
    salts = CacheSalts.in_directory(tmp_path)
    assert (tmp_path / "cache-salt.key").stat().st_mode & 0o777 == 0o600
    again = CacheSalts.in_directory(tmp_path)  # a restart: the same secret
    assert salts.salt("key:a") == again.salt("key:a") != salts.salt("key:b")
    assert salts.salt(None) == again.salt(None) != salts.salt("jupyter")
    (tmp_path / "elsewhere").mkdir()
    other = CacheSalts.in_directory(tmp_path / "elsewhere")
    assert other.salt("key:a") != salts.salt("key:a")  # another server's secret
    assert len(salts.salt(None)) >= 43

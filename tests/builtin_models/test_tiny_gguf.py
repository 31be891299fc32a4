"""The tiny GGUF builder: deterministic files that llama.cpp loads."""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path

import gguf

from jupyter_superfluid.builtin_models.templates import CHATML, QWEN3, SPECIAL_TOKENS
from jupyter_superfluid.builtin_models.tiny_gguf import (
    BUILTIN_MODELS,
    Vocab,
    build_model,
    ensure_builtin,
)
from jupyter_superfluid.engine.local.llama import LlamaEngine


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_same_inputs_give_byte_identical_files(tmp_path: Path) -> None:
    a = build_model(tmp_path / "a.gguf", chat_template=CHATML, seed=7)
    b = build_model(tmp_path / "b.gguf", chat_template=CHATML, seed=7)
    c = build_model(tmp_path / "c.gguf", chat_template=CHATML, seed=8)
    assert _digest(a) == _digest(b)
    assert _digest(a) != _digest(c)


def test_gguf_metadata(tmp_path: Path) -> None:
    path = build_model(tmp_path / "m.gguf", chat_template=QWEN3)
    reader = gguf.GGUFReader(path)
    fields = reader.fields
    assert fields["general.architecture"].contents() == "llama"
    assert fields["tokenizer.ggml.model"].contents() == "gpt2"
    assert fields["tokenizer.chat_template"].contents() == QWEN3
    tokens = fields["tokenizer.ggml.tokens"].contents()
    assert len(fields["tokenizer.ggml.merges"].contents()) >= 1
    assert tokens[fields["tokenizer.ggml.eos_token_id"].contents()] == "<|im_end|>"
    types = fields["tokenizer.ggml.token_type"].contents()
    for special in SPECIAL_TOKENS:
        assert types[tokens.index(special)] == gguf.TokenType.CONTROL


def test_ensure_builtin_is_cached_and_race_safe(tmp_path: Path) -> None:
    paths: list[Path] = []
    threads = [
        threading.Thread(
            target=lambda: paths.append(ensure_builtin("superfluid/tiny-qwen3", tmp_path))
        )
        for _ in range(3)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(paths)) == 1
    assert [p.name for p in tmp_path.iterdir()] == [paths[0].name]  # no temp files left
    assert ensure_builtin("superfluid/tiny-qwen3", tmp_path) == paths[0]


def test_llama_cpp_loads_every_builtin(sf_models: dict[str, Path]) -> None:
    templates = {
        "superfluid/tiny-chatml": CHATML,
        "superfluid/tiny-qwen3": QWEN3,
        "superfluid/tiny-vision": CHATML,
        "superfluid/tiny-audio": CHATML,
    }
    assert set(sf_models) == set(BUILTIN_MODELS)
    for model_id, path in sf_models.items():
        engine = LlamaEngine.load(model_id, path)
        try:
            info = engine.info
            assert info.id == model_id
            assert info.chat_template == templates[model_id]
            assert info.eos_token == "<|im_end|>"
            assert info.bos_token == "<|endoftext|>"
            eog = {engine.tokenize(t)[0] for t in ("<|im_end|>", "<|endoftext|>")}
            assert eog == set(info.eog_token_ids)
            assert info.context_size == 4096
        finally:
            engine.close_sync()


def test_realistic_shapes_build_and_load(tmp_path: Path) -> None:
    # A grouped-query, f16 model in the shape family used by the benchmarks.
    path = build_model(
        tmp_path / "gqa.gguf",
        chat_template=CHATML,
        n_layer=3,
        n_embd=128,
        n_head=8,
        n_head_kv=2,
        n_ff=320,
        context_length=8192,
        f16=True,
    )
    engine = LlamaEngine.load("gqa", path, context_size=8192)
    try:
        assert engine.info.context_size == 8192
    finally:
        engine.close_sync()


LLAMA3 = (
    "{% for m in messages %}<|start_header_id|>{{ m.role }}<|end_header_id|>\n\n"
    "{{ m.content }}<|eot_id|>{% endfor %}"
    "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"
)


def test_a_template_s_markers_are_single_control_tokens(tmp_path: Path) -> None:
    vocab = Vocab(
        special_tokens=("<|start_header_id|>", "<|end_header_id|>", "<|python_tag|>"),
        eos_token="<|eot_id|>",
        eog_tokens=("<|eom_id|>",),
    )
    path = build_model(tmp_path / "m.gguf", chat_template=LLAMA3, vocab=vocab)
    engine = LlamaEngine.load("llama3", path)
    try:
        markers = ("<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>", "<|eom_id|>")
        ids = [engine.tokenize(m) for m in markers]
        assert all(len(i) == 1 for i in ids)
        assert engine.info.eos_token == "<|eot_id|>"
        # The end of turn and the end of a call's message both end a generation.
        assert {ids[2][0], ids[3][0]} <= set(engine.info.eog_token_ids)
        assert ids[0][0] not in engine.info.eog_token_ids
        assert engine.detokenize(ids[0]) == "<|start_header_id|>"
    finally:
        engine.close_sync()


def test_a_model_named_phi_3_loads(tmp_path: Path) -> None:
    # llama.cpp looks up <s>, </s>, <unk> and <|endoftext|> by text for models whose
    # name says phi-3 (llama-vocab.cpp); without them it failed "unordered_map::at".
    vocab = Vocab(special_tokens=("<|user|>", "<|assistant|>"), eos_token="<|end|>")
    path = build_model(
        tmp_path / "phi.gguf",
        chat_template=CHATML,
        vocab=vocab,
        name="microsoft-Phi-3.5-mini-instruct",
    )
    engine = LlamaEngine.load("phi", path)
    try:
        assert engine.info.eos_token == "<|end|>"
    finally:
        engine.close_sync()

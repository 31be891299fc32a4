"""Prompts tokenized piece by piece hold the model's BOS once, first, as one whole prompt.

Real llama.cpp engines on tiny GGUFs whose tokenizer adds a BOS (``add_bos_token``, as
Llama 3, Gemma and Mistral GGUFs set it), with templates that write the BOS text
themselves or not, per message or not. The expected ids are llama.cpp's own for the
whole rendered prompt: with the template's BOS text, its added BOS is one too many.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from jupyter_superfluid.builtin_models.templates import CHATML, QWEN3, SPECIAL_TOKENS
from jupyter_superfluid.builtin_models.tiny_gguf import BOS_TOKEN, Vocab, build_model
from jupyter_superfluid.chat.codec import ChatCodec
from jupyter_superfluid.chat.types import ChatMessage
from jupyter_superfluid.engine.local.llama import LlamaEngine
from jupyter_superfluid.generation.prompt_tokens import prompt_tokens
from jupyter_superfluid.generation.prompting import Continuation, PromptBuilder

WRITES_BOS = "{{- bos_token }}" + CHATML  # a template that writes the BOS (Llama 3's do)
U1, A1, U2 = ChatMessage("user", "hi"), ChatMessage("assistant", "yo"), ChatMessage("user", "on")


@pytest.fixture(scope="module")
def bos_engines(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, LlamaEngine]]:
    """Engines whose tokenizer adds a BOS, one per template."""
    root = tmp_path_factory.mktemp("bos-models")
    vocab = Vocab(special_tokens=SPECIAL_TOKENS[1:], add_bos=True)
    engines = {
        name: LlamaEngine.load(
            name, build_model(root / f"{name}.gguf", chat_template=t, vocab=vocab), threads=1
        )
        for name, t in (("writes-bos", WRITES_BOS), ("chatml", CHATML), ("qwen3", QWEN3))
    }
    yield engines
    for engine in engines.values():
        engine.close_sync()


def builder_of(engine: LlamaEngine) -> PromptBuilder:
    info = engine.info
    template = info.chat_template or ""
    codec = ChatCodec(template, bos_token=info.bos_token, eos_token=info.eos_token)
    return PromptBuilder(codec, prompt_tokens(engine))


def bos_id(engine: LlamaEngine) -> int:
    lead = engine.tokenize("")
    assert lead == [engine.tokenize(BOS_TOKEN)[1]]  # the tokenizer does add one
    return lead[0]


@pytest.mark.parametrize("name", ["writes-bos", "chatml", "qwen3"])
def test_a_fresh_prompt_has_one_bos_first(bos_engines: dict[str, LlamaEngine], name: str):
    engine = bos_engines[name]
    builder, bos = builder_of(engine), bos_id(engine)
    prompt = builder.fresh((), (U1, A1, U2), (), {})
    whole = engine.tokenize(prompt.text)  # llama.cpp's BOS, then the text's ids
    assert prompt.forkable is (name != "qwen3")  # Qwen3's drops earlier reasoning
    assert prompt.tokens == (whole[1:] if name == "writes-bos" else whole)
    assert prompt.tokens[0] == bos and prompt.tokens.count(bos) == 1
    assert [t for e in prompt.events for t in e.tokens] + prompt.gen_prompt == prompt.tokens


@pytest.mark.parametrize("name", ["writes-bos", "chatml"])
def test_a_fork_adds_pieces_without_a_bos(bos_engines: dict[str, LlamaEngine], name: str):
    engine = bos_engines[name]
    builder, bos = builder_of(engine), bos_id(engine)
    first = builder.fresh((), (U1,), (), {})
    reply = engine.tokenize("yo<|im_end|>\n")[1:]
    stored = first.tokens + reply
    forked = builder.fork(Continuation((U1, A1), "sess_1", 3), stored, (), (U2,), (), {})
    assert forked is not None and forked.parent == ("sess_1", 3)
    new = forked.tokens[len(stored) :]
    before = builder.render((U1, A1), (), {}, generation=False)
    assert new == engine.tokenize(forked.text[len(before) :])[1:]
    assert bos not in new and forked.tokens.count(bos) == 1


def test_closings_are_pieces(bos_engines: dict[str, LlamaEngine]):
    engine = bos_engines["chatml"]
    builder, bos = builder_of(engine), bos_id(engine)
    prompt = builder.fresh((), (U1,), (), {})
    assert builder.expected_closing(prompt, (), {}) == engine.tokenize("\n")[1:]
    closing = builder.closing(prompt, "yo<|im_end|>", A1, (), {})
    assert closing == engine.tokenize("\n")[1:] and bos not in closing


def test_a_model_without_bos_is_tokenized_whole(sf_models: dict[str, Path]):
    engine = LlamaEngine.load("chatml", sf_models["superfluid/tiny-chatml"], threads=1)
    try:
        assert engine.tokenize("") == []
        prompt = builder_of(engine).fresh((), (U1, A1, U2), (), {})
        assert prompt.tokens == engine.tokenize(prompt.text)
        assert prompt_tokens(engine) is prompt_tokens(engine)  # one per engine
    finally:
        engine.close_sync()

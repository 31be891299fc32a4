"""A template that renders earlier turns anew (Qwen3's) has its prompts extended, not redone.

Real llama.cpp engines on the tiny Qwen3-template models. A continued turn keeps the
stored prompt's tokens up to its generation prompt and tokenizes only the rest: the ids
are the whole prompt's own, and a text that does not begin as the stored one did is
rendered afresh.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from jupyter_superfluid.builtin_models.templates import QWEN3, SPECIAL_TOKENS
from jupyter_superfluid.builtin_models.tiny_gguf import Vocab, build_model
from jupyter_superfluid.chat.codec import ChatCodec
from jupyter_superfluid.chat.types import ChatMessage
from jupyter_superfluid.engine.local.llama import LlamaEngine
from jupyter_superfluid.generation.prompt_tokens import prompt_tokens
from jupyter_superfluid.generation.prompting import PromptBuilder, PromptSplit

NO_THINKING = {"enable_thinking": False}
U1, U2, U3 = (ChatMessage("user", t) for t in ("one", "two two", "three"))
A1 = ChatMessage("assistant", "a reply", reasoning="thought")
A2 = ChatMessage("assistant", "again")


@pytest.fixture(scope="module", params=["plain", "adds-bos"])
def qwen3(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    sf_models: dict[str, Path],
) -> Iterator[LlamaEngine]:
    """The built-in tiny Qwen3, and one whose tokenizer adds a BOS."""
    if request.param == "plain":
        path = sf_models["superfluid/tiny-qwen3"]
    else:
        vocab = Vocab(special_tokens=SPECIAL_TOKENS[1:], add_bos=True)
        path = build_model(
            tmp_path_factory.mktemp("q") / "m.gguf", chat_template=QWEN3, vocab=vocab
        )
    engine = LlamaEngine.load(request.param, path, threads=1)
    yield engine
    engine.close_sync()


def builder_of(engine: LlamaEngine) -> PromptBuilder:
    codec = ChatCodec(QWEN3, eos_token=engine.info.eos_token)
    assert not codec.renders_per_message
    return PromptBuilder(codec, prompt_tokens(engine))


@pytest.mark.parametrize("kwargs", [NO_THINKING, {}])
def test_each_turn_extends_the_last_with_the_whole_prompts_ids(qwen3: LlamaEngine, kwargs):
    builder = builder_of(qwen3)
    first = builder.fresh((), (U1,), (), kwargs)
    assert first.split is not None
    reply = qwen3.tokenize("a reply<|im_end|>")  # what the stored turn generated
    second = builder.extend(first.split, first.tokens + reply, (U1, A1, U2), (), kwargs)
    assert second is not None and second.split is not None
    assert second.tokens == builder.fresh((), (U1, A1, U2), (), kwargs).tokens
    assert second.tokens[: first.split.tokens] == first.tokens[: first.split.tokens]
    third = builder.extend(second.split, second.tokens + reply, (U1, A1, U2, A2, U3), (), kwargs)
    assert third is not None
    assert third.tokens == builder.fresh((), (U1, A1, U2, A2, U3), (), kwargs).tokens
    assert not third.forkable and third.parent is None  # logged whole, as a rebuilt prompt


def test_the_split_is_before_the_generation_prompt(qwen3: LlamaEngine):
    builder = builder_of(qwen3)
    first = builder.fresh((), (U1, A1, U2), (), NO_THINKING)
    assert first.split is not None
    kept = builder.render((U1, A1, U2), (), NO_THINKING, generation=False)
    assert first.split.chars == len(kept)
    assert first.text[first.split.chars :].startswith("<|im_start|>assistant")
    tail = prompt_tokens(qwen3).piece(first.text[first.split.chars :])
    assert first.split.tokens == len(first.tokens) - len(tail)


def test_a_text_that_begins_otherwise_is_not_extended(qwen3: LlamaEngine):
    builder = builder_of(qwen3)
    first = builder.fresh((), (U1,), (), NO_THINKING)
    assert first.split is not None
    stored = first.tokens + qwen3.tokenize("a reply<|im_end|>")
    edited = (ChatMessage("user", "ONE"), A1, U2)  # the same length, another text
    assert builder.extend(first.split, stored, edited, (), NO_THINKING) is None
    system = (ChatMessage("system", "be brief"), U1, A1, U2)
    assert builder.extend(first.split, stored, system, (), NO_THINKING) is None
    short = PromptSplit(first.split.chars, len(stored) + 1, first.split.digest)
    assert builder.extend(short, stored, (U1, A1, U2), (), NO_THINKING) is None


@pytest.mark.parametrize("meta", [None, [1, 2], ["1", 2, "x"], [1, 2, 3]])
def test_an_unreadable_split_in_meta_is_none(meta):
    assert PromptSplit.from_meta(meta) is None
    assert PromptSplit.from_meta(PromptSplit(3, 2, "ab").to_meta()) == PromptSplit(3, 2, "ab")

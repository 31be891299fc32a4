"""LlamaEngine on a real tiny model: tokens, sampling, grammars, limits, cancellation."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from sf_engine_helpers import Generation, agenerate, chat_prompt, generate
from support.no_eos import NO_EOS

from jupyter_superfluid.engine.base import (
    ContextOverflowError,
    Engine,
    EngineError,
    EngineEvent,
    GenerateRequest,
    GenerationFinished,
    ModelLoadError,
    SamplingParams,
    TokenGenerated,
)
from jupyter_superfluid.engine.local.llama import LlamaEngine


async def generated_beside(engine: LlamaEngine) -> int:
    """Tokens the engine generated for other sequences while one more ran to its end.

    That one takes four steps (its prompt with its first token, then three tokens), and
    a sequence still generating beside it adds a token to each: 0 means none runs.
    """
    before = engine.tokens_generated
    run = await agenerate(engine, [ord("q")], max_tokens=4, logit_bias=NO_EOS)
    return engine.tokens_generated - before - len(run.tokens)


def test_is_an_engine(sf_engine: LlamaEngine) -> None:
    assert isinstance(sf_engine, Engine)


def test_tokenize_round_trip_with_special_tokens(sf_engine: LlamaEngine) -> None:
    text = "<|im_start|>user\nHé, 你好 <think>x</think><|im_end|>\n"
    ids = sf_engine.tokenize(text)
    assert sf_engine.detokenize(ids) == text
    for special in ("<|im_start|>", "<|im_end|>", "<think>", "</think>", "<tool_call>"):
        [one] = sf_engine.tokenize(special)
        assert sf_engine.detokenize([one]) == special
    # Without special parsing the markup is plain text (several byte tokens).
    assert len(sf_engine.tokenize("<|im_end|>", special=False)) > 1
    # No BOS is added: the model does not ask for one.
    assert sf_engine.tokenize("a") == [ord("a")]


def test_seeded_sampling_is_reproducible(sf_engine: LlamaEngine) -> None:
    prompt = chat_prompt(sf_engine, "Tell me a story")
    a = generate(sf_engine, prompt, seed=11, max_tokens=40)
    b = generate(sf_engine, prompt, seed=11, max_tokens=40)
    c = generate(sf_engine, prompt, seed=12, max_tokens=40)
    assert a.tokens == b.tokens and a.text == b.text
    assert a.tokens != c.tokens


def test_greedy_is_reproducible_and_does_not_stop_at_once(sf_engine: LlamaEngine) -> None:
    prompt = chat_prompt(sf_engine, "Hello")
    a = generate(sf_engine, prompt, temperature=0, max_tokens=30)
    b = generate(sf_engine, prompt, temperature=0, max_tokens=30)
    assert a.tokens == b.tokens
    assert len(a.tokens) > 3


def test_default_sampling_ends_by_itself(sf_engine: LlamaEngine) -> None:
    prompt = chat_prompt(sf_engine, "Hi there")
    runs = [generate(sf_engine, prompt, seed=s, max_tokens=400) for s in range(10)]
    stopped = [r for r in runs if r.finished.reason == "stop"]
    assert len(stopped) >= 8
    for run in stopped:
        # The end-of-generation token is emitted, rendered, and counted (its
        # text may start with U+FFFD for bytes of an unfinished character).
        last = run.events[-2]
        assert isinstance(last, TokenGenerated)
        assert last.token_id == sf_engine.tokenize("<|im_end|>")[0]
        assert last.text.endswith("<|im_end|>")
        assert run.finished.completion_tokens == len(run.tokens)
    assert 5 < sum(len(r.tokens) for r in runs) / len(runs) < 150


def test_text_is_the_incremental_decoding_of_the_tokens(sf_engine: LlamaEngine) -> None:
    prompt = chat_prompt(sf_engine, "bytes")
    for seed in range(5):
        run = generate(sf_engine, prompt, seed=seed, max_tokens=60)
        assert run.text == sf_engine.detokenize(run.tokens)


def test_utf8_split_across_tokens_comes_out_whole(sf_engine: LlamaEngine) -> None:
    # A grammar forces "é" (two byte tokens) then "你" (three): the first
    # bytes of each give no text, the last gives the whole character.
    run = generate(sf_engine, [ord("x")], grammar='root ::= "é你"', max_tokens=10)
    texts = [e.text for e in run.events if isinstance(e, TokenGenerated)]
    assert texts[:5] == ["", "é", "", "", "你"]
    assert run.finished.reason == "stop"


def test_grammar_constrained_json(sf_engine: LlamaEngine) -> None:
    grammar = r"""
root   ::= "{" ws "\"name\":" ws string "," ws "\"n\":" ws digit digit? "}"
string ::= "\"" [a-z]{1,8} "\""
digit  ::= [0-9]
ws     ::= " "?
"""
    prompt = chat_prompt(sf_engine, "Give JSON")
    for seed in range(4):
        run = generate(sf_engine, prompt, seed=seed, grammar=grammar, max_tokens=60)
        assert run.finished.reason == "stop"
        body = run.text.removesuffix("<|im_end|>")
        value = json.loads(body)
        assert set(value) == {"name", "n"}


def test_invalid_grammar_raises_at_once(sf_engine: LlamaEngine) -> None:
    with pytest.raises(EngineError, match="grammar"):
        sf_engine.generate(GenerateRequest((1, 2), SamplingParams(grammar="root ::= (")))


@dataclass(frozen=True)
class _BiasedSampling(SamplingParams):
    """SamplingParams plus the OpenAI-style logit_bias the engine honours."""

    logit_bias: dict[int, float] | None = None


def test_logit_bias_bans_the_end_token(sf_engine: LlamaEngine) -> None:
    eos = sf_engine.tokenize("<|im_end|>")[0]
    prompt = tuple(chat_prompt(sf_engine, "Hi"))

    async def run(bias: dict[int, float] | None) -> list[int]:
        sampling = _BiasedSampling(seed=4, max_tokens=300, logit_bias=bias)
        events = [e async for e in sf_engine.generate(GenerateRequest(prompt, sampling))]
        return [e.token_id for e in events if isinstance(e, TokenGenerated)]

    assert asyncio.run(run(None))[-1] == eos  # ends by itself...
    banned = asyncio.run(run({eos: -100}))
    assert len(banned) == 300 and eos not in banned  # ...but not when banned
    forced = asyncio.run(run({ord("z"): 100}))
    assert set(forced) == {ord("z")}


def test_max_tokens_gives_length_with_exact_count(sf_engine: LlamaEngine) -> None:
    prompt = chat_prompt(sf_engine, "Count")
    run = generate(sf_engine, prompt, temperature=0, max_tokens=7)
    assert run.finished.reason == "length"
    assert run.finished.completion_tokens == 7 == len(run.tokens)


def test_context_overflow_and_window_end(sf_make_engine: Callable[..., LlamaEngine]) -> None:
    engine = sf_make_engine(context_size=64)
    with pytest.raises(ContextOverflowError) as info:
        engine.generate(GenerateRequest(tuple([ord("a")] * 64)))
    assert info.value.prompt_tokens == 64 and info.value.context_size == 64
    # 60 prompt tokens leave 4; a grammar that never completes runs into the end.
    run = generate(engine, [ord("a")] * 60, grammar="root ::= [a-z] root", seed=1)
    assert run.finished.reason == "length"
    assert run.finished.completion_tokens == 4


def test_bad_requests_raise(sf_engine: LlamaEngine) -> None:
    with pytest.raises(EngineError, match="empty"):
        sf_engine.generate(GenerateRequest(()))
    with pytest.raises(EngineError, match="vocabulary"):
        sf_engine.generate(GenerateRequest((1, 10**6)))
    with pytest.raises(EngineError, match="max_tokens"):
        sf_engine.generate(GenerateRequest((1,), SamplingParams(max_tokens=0)))


def test_aclose_cancels_before_the_next_token(sf_engine: LlamaEngine) -> None:
    async def scenario() -> tuple[int, int]:
        prompt = chat_prompt(sf_engine, "Go on forever")
        stream = sf_engine.generate(
            GenerateRequest(tuple(prompt), SamplingParams(grammar="root ::= [a-z] root"))
        )
        seen = 0
        async for event in stream:
            seen += isinstance(event, TokenGenerated)
            if seen == 3:
                break
        await stream.aclose()  # type: ignore[attr-defined]
        return await generated_beside(sf_engine), await generated_beside(sf_engine)

    # At most the token of the step under way when it was closed; then none.
    first, second = asyncio.run(scenario())
    assert first <= 1 and second == 0


def test_cancelling_the_task_cancels_the_generation(sf_engine: LlamaEngine) -> None:
    async def scenario() -> tuple[int, int]:
        prompt = chat_prompt(sf_engine, "Endless")
        started = asyncio.Event()

        async def endless() -> None:
            request = GenerateRequest(tuple(prompt), SamplingParams(grammar="root ::= [a-z] root"))
            async for event in sf_engine.generate(request):
                if isinstance(event, TokenGenerated):
                    started.set()

        task = asyncio.ensure_future(endless())
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return await generated_beside(sf_engine), await generated_beside(sf_engine)

    first, second = asyncio.run(scenario())
    assert first <= 1 and second == 0
    # The engine still serves afterwards.
    assert len(generate(sf_engine, [ord("a")], max_tokens=2, logit_bias=NO_EOS).tokens) == 2


def test_concurrent_generations_match_solo_runs(sf_make_engine: Callable[..., LlamaEngine]) -> None:
    engine = sf_make_engine()
    prompts = [chat_prompt(engine, f"Question number {i}: " + "why? " * i) for i in range(8)]
    solo = [generate(engine, p, seed=100 + i, max_tokens=48) for i, p in enumerate(prompts)]

    async def together() -> list:
        return await asyncio.gather(
            *(agenerate(engine, p, seed=100 + i, max_tokens=48) for i, p in enumerate(prompts))
        )

    fresh = sf_make_engine()  # nothing cached: all prompts are evaluated side by side
    calls_before = fresh.stats()["decode_calls"]
    batched = asyncio.run(together_on(fresh, prompts))
    for one, many in zip(solo, batched, strict=True):
        assert many.finished.reason == one.finished.reason
        assert many.tokens == one.tokens
    # Batched: far fewer decode calls than tokens produced.
    produced = sum(len(g.tokens) for g in batched)
    assert fresh.stats()["decode_calls"] - calls_before < produced
    # And again on the warm engine, where the prompts come from the cache.
    warm = asyncio.run(together())
    assert [g.tokens for g in warm] == [g.tokens for g in solo]


async def together_on(engine: LlamaEngine, prompts: list[list[int]]) -> list:
    """Start the eight generations at once on ``engine``."""
    return await asyncio.gather(
        *(agenerate(engine, p, seed=100 + i, max_tokens=48) for i, p in enumerate(prompts))
    )


def test_close_while_streaming_finishes_with_cancelled(
    sf_make_engine: Callable[..., LlamaEngine],
) -> None:
    engine = sf_make_engine()

    async def scenario() -> list[GenerationFinished]:
        streams = [
            agenerate(engine, chat_prompt(engine, f"s{i}"), grammar="root ::= [a-z] root")
            for i in range(3)
        ]
        tasks = [asyncio.ensure_future(s) for s in streams]
        await asyncio.sleep(0.1)
        await engine.close()
        return [(await t).finished for t in tasks]

    finished = asyncio.run(scenario())
    assert [f.reason for f in finished] == ["cancelled"] * 3
    with pytest.raises(EngineError, match="closed"):
        engine.generate(GenerateRequest((1,)))


def test_kv_full_fails_the_newest_request_and_the_worker_lives(
    sf_make_engine: Callable[..., LlamaEngine],
) -> None:
    # 4000 prompt tokens fit the 4096 cells alone, never beside an answer that is
    # generating (3900 tokens to go once it is seen generating, and it holds 100 or
    # more): the prompt's last chunk finds the cache full, and the newest sequence is
    # the one that fails. The other goes on; the worker serves the next request.
    engine = sf_make_engine(context_size=4096, kv_tokens=4096)
    long_prompt = [ord("b")] * 4000

    async def scenario() -> tuple[Generation, EngineEvent]:
        sampling = SamplingParams(max_tokens=3900, seed=1, logit_bias=NO_EOS)
        running = engine.generate(GenerateRequest(tuple([ord("a")] * 100), sampling))
        try:
            async for event in running:
                if isinstance(event, TokenGenerated):
                    break
            beside = await agenerate(engine, long_prompt, max_tokens=8, seed=1)
            return beside, await anext(running)
        finally:
            await running.aclose()

    beside, after = asyncio.run(scenario())
    assert beside.finished.reason == "error"
    assert beside.finished.error == "KV cache full" and beside.tokens == []
    assert isinstance(after, TokenGenerated)  # the running answer was not the one failed
    alone = generate(engine, long_prompt, max_tokens=8, seed=1, logit_bias=NO_EOS)
    assert alone.finished.reason == "length" and len(alone.tokens) == 8


@pytest.mark.timeout(60)  # a broken file fails at once (a hang guard, not a measure)
def test_unloadable_files_raise_model_load_error(tmp_path: Path) -> None:
    missing = tmp_path / "missing.gguf"
    with pytest.raises(ModelLoadError, match=r"missing\.gguf.*not found"):
        LlamaEngine.load("m", missing)
    text = tmp_path / "notes.gguf"
    text.write_text("hello")
    with pytest.raises(ModelLoadError, match=r"notes\.gguf.*not a GGUF"):
        LlamaEngine.load("m", text)
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF" + b"\x03\x00\x00\x00" + b"\xff" * 64)
    with pytest.raises(ModelLoadError, match=r"broken\.gguf") as info:
        LlamaEngine.load("m", broken)
    assert "no reason" not in str(info.value)  # llama.cpp's own explanation is quoted

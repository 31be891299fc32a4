"""ProcessEngine: the engine in a supervised process, through the same Engine seam."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Callable
from pathlib import Path

import pytest
from sf_engine_helpers import Generation, agenerate, chat_prompt
from support.engine_processes import engine_children, is_running
from support.media_samples import png
from support.no_eos import NO_EOS

from jupyter_superfluid.builtin_models.tiny_gguf import ensure_builtin_projector
from jupyter_superfluid.engine.base import (
    MEDIA_MARKER,
    ContextOverflowError,
    Engine,
    EngineError,
    GenerateRequest,
    GenerationFinished,
    MediaError,
    ModelLoadError,
    SamplingParams,
    TokenGenerated,
)
from jupyter_superfluid.engine.local.llama import LlamaEngine
from jupyter_superfluid.engine.process.client import ProcessEngine

CHATML = "superfluid/tiny-chatml"


async def start(
    models: dict[str, Path], model_id: str = CHATML, **options: object
) -> ProcessEngine:
    options.setdefault("threads", 1)
    return await ProcessEngine.start(model_id, models[model_id], **options)


async def endless(engine: ProcessEngine, prompt: list[int]):  # type: ignore[no-untyped-def]
    request = GenerateRequest(tuple(prompt), SamplingParams(seed=3, logit_bias=NO_EOS))
    return engine.generate(request)


def test_the_process_engine_generates_what_the_thread_engine_does(
    sf_models: dict[str, Path], sf_make_engine: Callable[..., LlamaEngine]
) -> None:
    sf_engine = sf_make_engine()  # a cold cache, as the new process's
    prompt = chat_prompt(sf_engine, "Hello there")
    here = asyncio.run(agenerate(sf_engine, prompt, seed=5, max_tokens=40))

    async def scenario() -> tuple[list[int], str, Generation, dict, int | None]:
        engine = await start(sf_models)
        try:
            assert isinstance(engine, Engine)
            text = "<|im_start|>user\nHello there<|im_end|>\n<|im_start|>assistant\n"
            tokens = await asyncio.to_thread(engine.tokenize, text)
            back = await asyncio.to_thread(engine.detokenize, tokens)
            run = await agenerate(engine, tokens, seed=5, max_tokens=40)
            return tokens, back, run, engine.stats(), engine.pid
        finally:
            await engine.close()

    tokens, back, there, stats, pid = asyncio.run(scenario())
    assert tokens == prompt and back == sf_engine.detokenize(prompt)
    assert there.tokens == here.tokens and there.text == here.text
    assert there.prompt == here.prompt and there.finished == here.finished
    assert stats["tokens_generated"] == len(there.tokens)
    assert stats["prompt_tokens_evaluated"] == len(prompt)
    assert stats["engine_pid"] == pid and pid != os.getpid()
    assert pid is not None and not is_running(pid)  # closing ended the process


def test_refusals_keep_their_types(sf_models: dict[str, Path]) -> None:
    async def scenario() -> None:
        engine = await start(sf_models, context_size=64)
        try:
            with pytest.raises(ContextOverflowError) as info:
                await agenerate(engine, [ord("a")] * 64)
            assert (info.value.prompt_tokens, info.value.context_size) == (64, 64)
            with pytest.raises(EngineError, match="invalid grammar"):
                await agenerate(engine, [ord("a")], grammar="root ::= (")
            with pytest.raises(EngineError, match="vocabulary"):
                await agenerate(engine, [1, 10**6])
            with pytest.raises(MediaError, match="no images or audio"):
                await asyncio.to_thread(engine.tokenize_media, MEDIA_MARKER, [png(8, 8, seed=1)])
            # The engine serves on after every refusal.
            run = await agenerate(engine, [ord("a")] * 10, max_tokens=3, seed=0, logit_bias=NO_EOS)
            assert run.finished.completion_tokens == 3
        finally:
            await engine.close()

    asyncio.run(scenario())


def test_load_errors_are_the_thread_engines(tmp_path: Path) -> None:
    text = tmp_path / "notes.gguf"
    text.write_text("hello")
    with pytest.raises(ModelLoadError) as here:
        LlamaEngine.load("m", text)
    with pytest.raises(ModelLoadError) as there:
        asyncio.run(ProcessEngine.start("m", text))
    assert str(there.value) == str(here.value)
    assert engine_children() == []


def test_media_stay_in_the_engine_process(sf_models: dict[str, Path], tmp_path: Path) -> None:
    vision = "superfluid/tiny-vision"
    mmproj = ensure_builtin_projector(vision, sf_models[vision].parent)
    text = f"<|im_start|>user\n{MEDIA_MARKER}what?<|im_end|>\n<|im_start|>assistant\n"

    async def scenario() -> tuple[Generation, Generation, int]:
        engine = await start(sf_models, vision, mmproj=mmproj)
        try:
            assert engine.info.accepts_images
            prompt = await asyncio.to_thread(engine.tokenize_media, text, [png(8, 8, seed=1)])
            assert [m.kind for m in prompt.media] == ["image"]
            assert prompt.tokens.count(prompt.media[0].placeholder_id) == prompt.media[0].n_pos
            request = GenerateRequest(
                prompt.tokens, SamplingParams(seed=1, max_tokens=5), media=prompt.media
            )
            first = Generation([e async for e in engine.generate(request)])
            again = Generation([e async for e in engine.generate(request)])
            return first, again, len(prompt.tokens)
        finally:
            await engine.close()

    first, again, n = asyncio.run(scenario())
    assert first.prompt.prompt_tokens == n and first.prompt.cached_tokens == 0
    assert again.prompt.cached_tokens == n - 1  # the image is served from the prefix cache
    assert again.tokens == first.tokens


def test_closing_the_stream_cancels_in_the_engine_process(sf_models: dict[str, Path]) -> None:
    async def scenario() -> tuple[int, int]:
        engine = await start(sf_models)
        try:
            stream = await endless(engine, chat_prompt(engine, "Go"))
            seen = 0
            async for event in stream:
                seen += isinstance(event, TokenGenerated)
                if seen == 5:
                    break
            await stream.aclose()
            # A generation that finishes afterwards proves the cancel was handled first.
            await agenerate(engine, [ord("a")] * 4, max_tokens=2, seed=0, logit_bias=NO_EOS)
            settled = engine.stats()["tokens_generated"]
            await asyncio.sleep(0.3)
            return settled, engine.stats()["tokens_generated"]
        finally:
            await engine.close()

    settled, later = asyncio.run(scenario())
    assert later == settled


def test_tokens_wait_for_the_stream_interval(sf_models: dict[str, Path]) -> None:
    """Held tokens share frames; a prompt and its first token, or an end, go at once."""

    async def run(interval: float) -> tuple[Generation, int]:
        engine = await start(sf_models, stream_interval=interval)
        try:
            prompt = chat_prompt(engine, "Hello there")
            before = engine.stats()["engine_frames"]
            run = await agenerate(engine, prompt, seed=5, max_tokens=40, logit_bias=NO_EOS)
            return run, engine.stats()["engine_frames"] - before
        finally:
            await engine.close()

    (each_step, step_frames), (held, held_frames) = (
        asyncio.run(run(0.0)),
        asyncio.run(run(3600)),
    )
    assert held.events == each_step.events
    assert step_frames >= 40  # a frame per step, a token per step
    assert held_frames == 2  # the prompt's evaluation with the first token; the rest with the end


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGSEGV])
def test_a_crash_ends_every_generation_and_the_engine_comes_back(
    sf_models: dict[str, Path], sig: signal.Signals
) -> None:
    async def scenario() -> tuple[
        list[tuple[int, GenerationFinished]], int, int | None, Generation, dict
    ]:
        engine = await start(sf_models)
        try:
            pid = engine.pid
            assert pid is not None
            streams = [await endless(engine, chat_prompt(engine, f"Go {i}")) for i in range(3)]
            ends: list[tuple[int, GenerationFinished]] = []

            async def drain(stream, kill: bool) -> None:  # type: ignore[no-untyped-def]
                seen = 0
                async for event in stream:
                    if isinstance(event, TokenGenerated):
                        seen += 1
                        if kill and seen == 10:
                            os.kill(pid, sig)
                    if isinstance(event, GenerationFinished):
                        ends.append((seen, event))

            await asyncio.gather(*(drain(s, i == 0) for i, s in enumerate(streams)))
            # Requests wait for the restart; the same prompt runs as before, cold.
            after = await agenerate(
                engine, [ord("a")] * 10, max_tokens=3, seed=0, logit_bias=NO_EOS
            )
            return ends, pid, engine.pid, after, engine.stats()
        finally:
            await engine.close()

    ends, pid, new_pid, after, stats = asyncio.run(scenario())
    assert [e.reason for _, e in ends] == ["error"] * 3
    assert {e.code for _, e in ends} == {"engine_crashed"}
    for seen, end in ends:
        assert end.error is not None and f"(pid {pid}) was killed by {sig.name}" in end.error
        assert "last log lines" in end.error
        assert end.completion_tokens == seen  # what each stream got before the crash
    assert max(seen for seen, _ in ends) >= 10
    if sig == signal.SIGSEGV:  # faulthandler's last words are quoted
        assert "Fatal Python error: Segmentation fault" in (ends[0][1].error or "")
    assert not is_running(pid) and new_pid not in (None, pid)
    assert after.finished.reason == "length" and after.prompt.cached_tokens == 0
    assert stats["engine_restarts"] == 1 and stats["engine_state"] == "ready"


def test_calls_wait_for_the_restart(sf_models: dict[str, Path]) -> None:
    async def scenario() -> tuple[list[int], list[int], int | None, int]:
        engine = await start(sf_models)
        try:
            pid = engine.pid
            assert pid is not None
            before = await asyncio.to_thread(engine.tokenize, "hello")
            os.kill(pid, signal.SIGKILL)
            after = await asyncio.to_thread(engine.tokenize, "hello")  # waits, no error
            return before, after, engine.pid, pid
        finally:
            await engine.close()

    before, after, new_pid, pid = asyncio.run(scenario())
    assert after == before and new_pid not in (None, pid)


def test_a_crash_while_loading_is_a_load_error(sf_models: dict[str, Path]) -> None:
    async def scenario() -> tuple[ModelLoadError, int]:
        loading = asyncio.ensure_future(ProcessEngine.start(CHATML, sf_models[CHATML]))
        while not engine_children():
            await asyncio.sleep(0.01)
        (pid,) = engine_children()
        # Stopped at once (it needs far longer to import llama.cpp and load), then killed.
        os.kill(pid, signal.SIGSTOP)
        await asyncio.sleep(0.1)
        assert not loading.done(), "it loaded before it could be stopped"
        os.kill(pid, signal.SIGKILL)
        with pytest.raises(ModelLoadError) as info:
            await loading
        return info.value, pid

    err, pid = asyncio.run(scenario())
    assert f"(pid {pid}) was killed by SIGKILL while loading" in str(err)
    assert engine_children() == []


def test_unloading_a_model_ends_its_engine_process(tmp_path: Path) -> None:
    from jupyter_superfluid.engine.launch import launch_in_process
    from jupyter_superfluid.models.registry import ModelRegistry

    registry = ModelRegistry([CHATML], cache_dir=tmp_path, launcher=launch_in_process)

    async def scenario() -> tuple[int | None, bool]:
        engine = await registry.get(CHATML)
        assert isinstance(engine, ProcessEngine)
        pid = engine.pid
        unloaded = await registry.unload(CHATML)
        await registry.close()
        return pid, unloaded

    pid, unloaded = asyncio.run(scenario())
    assert unloaded and pid is not None and not is_running(pid)
    assert engine_children() == []

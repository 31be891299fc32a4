"""The stall watchdog: an engine process that lives but makes no progress is killed, restarted.

Real engine processes: one stopped with SIGSTOP is killed after the stall timeout, its
generations end ``engine_crashed`` with a message saying why, a blocking call on it gives
up after the timeout and is answered by the next process; a live process in one long step
is left alone, unless that one step outlasts the timeout. The decision itself
(``StallClock``) is a pure function of what was heard.
"""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest
from sf_engine_helpers import agenerate, chat_prompt
from support.engine_processes import is_running, is_stopped, wait_until
from support.no_eos import NO_EOS
from support.slow_model import slow_model

from jupyter_superfluid.engine.base import (
    GenerateRequest,
    GenerationFinished,
    SamplingParams,
    TokenGenerated,
)
from jupyter_superfluid.engine.process.client import ProcessEngine
from jupyter_superfluid.engine.process.watchdog import (
    CALL_TIMEOUT_S,
    STALL_TIMEOUT_S,
    StallClock,
    Watch,
)

CHATML = "superfluid/tiny-chatml"
STALL_S = 2.0
STALLED = "stopped making progress for "


def test_a_stopped_engine_process_is_killed_and_its_generations_fail(
    sf_models: dict[str, Path],
) -> None:
    async def scenario() -> tuple[list[tuple[int, GenerationFinished]], int, int | None, dict]:
        engine = await ProcessEngine.start(
            CHATML, sf_models[CHATML], stall_timeout=STALL_S, threads=1
        )
        try:
            pid = engine.pid
            assert pid is not None
            sampling = SamplingParams(seed=3, logit_bias=NO_EOS)
            prompts = [chat_prompt(engine, f"Go {i}") for i in range(2)]
            streams = [engine.generate(GenerateRequest(tuple(p), sampling)) for p in prompts]
            ends: list[tuple[int, GenerationFinished]] = []

            async def drain(stream, stop: bool) -> None:  # type: ignore[no-untyped-def]
                seen = 0
                async for event in stream:
                    if isinstance(event, TokenGenerated):
                        seen += 1
                        if stop and seen == 10:
                            os.kill(pid, signal.SIGSTOP)  # alive, and silent
                    if isinstance(event, GenerationFinished):
                        ends.append((seen, event))

            drained = asyncio.gather(*(drain(s, i == 0) for i, s in enumerate(streams)))
            await asyncio.wait_for(drained, 60)  # without the watchdog: forever
            after = await agenerate(
                engine, [ord("a")] * 10, max_tokens=3, seed=0, logit_bias=NO_EOS
            )
            assert after.finished.reason == "length"
            return ends, pid, engine.pid, engine.stats()
        finally:
            await engine.close()

    ends, pid, new_pid, stats = asyncio.run(scenario())
    assert [e.reason for _, e in ends] == ["error", "error"]
    assert {e.code for _, e in ends} == {"engine_crashed"}
    for seen, end in ends:
        assert end.error is not None and f"(pid {pid}) {STALLED}" in end.error
        assert "(it sent nothing: stopped or frozen) and was killed" in end.error
        assert "; its last log lines: " in end.error
        assert end.completion_tokens == seen
    assert not is_running(pid) and new_pid not in (None, pid)
    assert stats["engine_stalls"] == 1 and stats["engine_restarts"] == 1


def test_a_call_on_a_stopped_engine_process_is_answered_by_the_next(
    sf_models: dict[str, Path],
) -> None:
    async def scenario() -> tuple[list[int], list[int], int, int | None, dict]:
        engine = await ProcessEngine.start(
            CHATML, sf_models[CHATML], stall_timeout=STALL_S, threads=1
        )
        try:
            pid = engine.pid
            assert pid is not None
            before = await asyncio.to_thread(engine.tokenize, "hello")
            os.kill(pid, signal.SIGSTOP)
            await asyncio.to_thread(wait_until, lambda: is_stopped(pid), "the process stops")
            # Unanswered for the stall timeout: the process is killed, the call goes again.
            after = await asyncio.wait_for(asyncio.to_thread(engine.tokenize, "hello"), 60)
            return before, after, pid, engine.pid, engine.stats()
        finally:
            await engine.close()

    before, after, pid, new_pid, stats = asyncio.run(scenario())
    assert after == before
    assert not is_running(pid) and new_pid not in (None, pid)
    assert stats["engine_stalls"] == 1


def test_one_long_live_step_is_not_a_stall(sf_model_cache: Path) -> None:
    # One step evaluates the whole prompt (about a second on this model and one thread):
    # heartbeats come all along it, and the stall timeout is far away.
    prompt = [ord("a") + i % 26 for i in range(1000)]

    async def scenario() -> tuple[GenerationFinished, int | None, int | None, int, dict]:
        engine = await ProcessEngine.start(
            "slow",
            slow_model(sf_model_cache),
            stall_timeout=120.0,
            heartbeat=0.02,
            threads=1,
            batch_size=1024,
            cache_slots=1,
        )
        try:
            pid = engine.pid
            run = await agenerate(engine, prompt, max_tokens=1, seed=0, logit_bias=NO_EOS)
            process = engine._supervisor.current
            assert process is not None
            return run.finished, pid, engine.pid, process.beats, engine.stats()
        finally:
            await engine.close()

    finished, pid, same_pid, beats, stats = asyncio.run(scenario())
    assert finished.reason == "length" and finished.completion_tokens == 1
    assert same_pid == pid and stats["engine_stalls"] == 0 and stats["engine_restarts"] == 0
    assert stats["decode_calls"] == 1  # the whole prompt in one step
    assert beats >= 3  # heard while that one step ran (llama.cpp releases the GIL)


def test_one_step_longer_than_the_timeout_is_a_stall(sf_model_cache: Path) -> None:
    # A live process whose worker sits in one llama.cpp call (4000 prompt tokens in one
    # step take seconds even on a fast core) looks like a wedged one: heartbeats come,
    # no step ends. The timeout is what must exceed the longest step.
    prompt = [ord("a") + i % 26 for i in range(4000)]

    async def scenario() -> tuple[GenerationFinished, int, int | None, int, dict]:
        engine = await ProcessEngine.start(
            "slow",
            slow_model(sf_model_cache),
            stall_timeout=1.0,
            heartbeat=0.02,
            threads=1,
            batch_size=4096,
            cache_slots=1,
        )
        try:
            pid = engine.pid
            assert pid is not None
            process = engine._supervisor.current
            assert process is not None
            run = await asyncio.wait_for(
                agenerate(engine, prompt, max_tokens=1, seed=0, logit_bias=NO_EOS), 60
            )
            after = await agenerate(
                engine, [ord("a")] * 10, max_tokens=2, seed=0, logit_bias=NO_EOS
            )
            assert after.finished.reason == "length"
            return run.finished, pid, engine.pid, process.beats, engine.stats()
        finally:
            await engine.close()

    finished, pid, new_pid, beats, stats = asyncio.run(scenario())
    assert finished.reason == "error" and finished.code == "engine_crashed"
    assert finished.error is not None and f"(pid {pid}) {STALLED}" in finished.error
    assert "(it was alive, but its worker did not finish a step) and was killed" in finished.error
    assert beats >= 3 and finished.completion_tokens == 0
    assert new_pid not in (None, pid) and stats["engine_stalls"] == 1


# -- the decision, step by step ------------------------------------------------


def test_the_clock_calls_silence_frozen_and_a_still_step_counter_wedged() -> None:
    clock = StallClock(10.0)
    clock.restart(100.0, (5, (5, 40)))
    assert clock.verdict(109.9, (5, (5, 40))) is None  # quiet, not yet long enough
    assert clock.verdict(110.0, (5, (5, 40))) == (
        "stopped making progress for 10.0 s (it sent nothing: stopped or frozen)"
    )
    clock.restart(200.0, (5, (5, 40)))
    for t in range(201, 210):  # heartbeats, the same step count each time
        assert clock.verdict(float(t), (5 + t - 200, (5, 40))) is None
    assert clock.verdict(210.0, (15, (5, 40))) == (
        "stopped making progress for 10.0 s (it was alive, but its worker did not finish a step)"
    )


def test_the_clock_restarts_on_every_frame_and_every_step() -> None:
    clock = StallClock(10.0)
    clock.restart(0.0, (0, (0, 0)))
    # A step every 9 s, each in one long call: heard, and moving, never stalled.
    for n in range(1, 20):
        assert clock.verdict(9.0 * n, (n, (0, n))) is None
    # Frames of events (no heartbeats) are progress too.
    for n in range(20, 40):
        assert clock.verdict(9.0 * n, (n, (n, 19))) is None
    assert clock.verdict(9.0 * 39 + 10.0, (39, (39, 19))) is not None


@pytest.mark.parametrize(
    ("watch", "period", "beat", "call_timeout"),
    [
        (Watch(), 1.0, 1.0, STALL_TIMEOUT_S),
        (Watch(2.0), 0.5, 0.5, 2.0),
        (Watch(60.0, heartbeat=0.02), 1.0, 0.02, 60.0),
        (Watch(0.0), 0.0, 0.0, CALL_TIMEOUT_S),  # off: no heartbeats, calls as before
        (Watch(0.0, heartbeat=0.5), 0.0, 0.0, CALL_TIMEOUT_S),
    ],
)
def test_the_watch_derives_its_periods_from_the_timeout(
    watch: Watch, period: float, beat: float, call_timeout: float
) -> None:
    assert (watch.enabled, watch.period, watch.beat) == (watch.timeout > 0, period, beat)
    assert watch.call_timeout == call_timeout

"""The prefix cache across conversations: measured reuse, branches, eviction."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from sf_engine_helpers import UNIFIED, Generation, agenerate, chat_prompt, generate

from jupyter_superfluid.engine.base import GenerateRequest, SamplingParams
from jupyter_superfluid.engine.local.llama import LlamaEngine

MakeEngine = Callable[..., LlamaEngine]


def _run(
    engine: LlamaEngine, prompt: list[int], *, retain: bool = False, **sampling: object
) -> tuple[Generation, int]:
    """Generate; also return how many prompt tokens the engine evaluated for it."""
    before = engine.prompt_tokens_evaluated
    run = generate(engine, prompt, retain=retain, **sampling)
    return run, engine.prompt_tokens_evaluated - before


def _continue(engine: LlamaEngine, prompt: list[int], run: Generation, user: str) -> list[int]:
    """The next turn's prompt: the previous prompt, the answer, a new user message."""
    tail = "" if run.finished.reason == "stop" else "<|im_end|>"
    turn = f"{tail}\n<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n"
    return prompt + run.tokens + engine.tokenize(turn)


def test_cached_tokens_is_exactly_what_was_not_evaluated(sf_make_engine: MakeEngine) -> None:
    engine = sf_make_engine()
    p = chat_prompt(engine, "The first question")
    first, evaluated = _run(engine, p, seed=1, max_tokens=6)
    assert first.prompt.cached_tokens == 0 and evaluated == len(p)
    px = p + engine.tokenize("more words")
    second, evaluated = _run(engine, px, seed=1, max_tokens=6)
    assert second.prompt.cached_tokens >= len(p) - 1
    assert evaluated == len(px) - second.prompt.cached_tokens
    # The very same prompt again: all but the last token (re-run for logits).
    third, evaluated = _run(engine, px, seed=1, max_tokens=6)
    assert third.prompt.cached_tokens == len(px) - 1 and evaluated == 1
    assert third.tokens == second.tokens


def test_a_continued_conversation_is_warm(sf_make_engine: MakeEngine) -> None:
    engine = sf_make_engine()
    p = chat_prompt(engine, "Hello")
    first, _ = _run(engine, p, seed=3, max_tokens=20)
    p2 = _continue(engine, p, first, "And then?")
    second, evaluated = _run(engine, p2, seed=3, max_tokens=20)
    # Everything the KV holds is reused: the prompt and every answer token
    # that was fed back (all but the last one sampled).
    assert second.prompt.cached_tokens == len(p) + len(first.tokens) - 1
    assert evaluated == len(p2) - second.prompt.cached_tokens


def test_interleaved_conversations_stay_warm(sf_make_engine: MakeEngine) -> None:
    engine = sf_make_engine()
    prompts = {k: chat_prompt(engine, f"Conversation {k} " * 3) for k in "ABC"}
    runs = {k: _run(engine, p, seed=5, max_tokens=10)[0] for k, p in prompts.items()}
    for k in "ABC":
        nxt = _continue(engine, prompts[k], runs[k], "go on")
        run, evaluated = _run(engine, nxt, seed=5, max_tokens=4)
        assert run.prompt.cached_tokens >= len(prompts[k]) + len(runs[k].tokens) - 1
        assert evaluated == len(nxt) - run.prompt.cached_tokens


def test_branching_one_prefix_twice_keeps_both_warm(sf_make_engine: MakeEngine) -> None:
    engine = sf_make_engine()
    p = chat_prompt(engine, "A shared start " * 4)
    base, _ = _run(engine, p, seed=2, max_tokens=8)
    branches = {}
    for name in ("left", "right"):
        prompt = _continue(engine, p, base, f"take the {name} branch")
        run, evaluated = _run(engine, prompt, seed=2, max_tokens=8)
        assert run.prompt.cached_tokens >= len(p) + len(base.tokens) - 1
        branches[name] = (prompt, run)
    # Each branch continues warm: forking did not overwrite the other one.
    for name, (prompt, run) in branches.items():
        nxt = _continue(engine, prompt, run, "more")
        again, evaluated = _run(engine, nxt, seed=2, max_tokens=4)
        assert again.prompt.cached_tokens >= len(prompt) + len(run.tokens) - 1, name
        assert evaluated == len(nxt) - again.prompt.cached_tokens
    # And the original stem is still there to branch once more.
    third = _continue(engine, p, base, "a third way")
    run, _ = _run(engine, third, seed=2, max_tokens=4)
    assert run.prompt.cached_tokens >= len(p) + len(base.tokens) - 1


def test_least_recently_used_slot_is_reused(sf_make_engine: MakeEngine) -> None:
    engine = sf_make_engine(cache_slots=2, park_mib=0)
    a, b, c = (chat_prompt(engine, f"{k} " * 20) for k in ("alpha", "beta", "gamma"))
    for prompt in (a, b, c):  # kept turns: a slot is never cut to let another in
        _run(engine, prompt, seed=1, max_tokens=3, retain=True)
    warm_c, _ = _run(engine, c, seed=1, max_tokens=3, retain=True)
    assert warm_c.prompt.cached_tokens == len(c) - 1
    cold_a, _ = _run(engine, a, seed=1, max_tokens=3)
    assert cold_a.prompt.cached_tokens < len(chat_prompt(engine, ""))  # only the template


def test_a_one_off_prompt_sent_again_is_cut_in_place_and_the_others_stay(
    sf_make_engine: MakeEngine,
) -> None:
    # With a stream per slot, repeating a one-off prompt cuts its own slot back to the
    # prompt rather than copying a whole stream over the least recent conversation.
    engine = sf_make_engine(cache_slots=2, park_mib=0)
    a, b = (chat_prompt(engine, f"{k} " * 20) for k in ("alpha", "beta"))
    for prompt in (a, b):
        _run(engine, prompt, seed=1, max_tokens=3)
    again_b, evaluated = _run(engine, b, seed=1, max_tokens=3)
    assert again_b.prompt.cached_tokens == len(b) - 1 and evaluated == 1
    warm_a, evaluated = _run(engine, a, seed=1, max_tokens=3)
    assert warm_a.prompt.cached_tokens == len(a) - 1 and evaluated == 1


@pytest.mark.parametrize("park_mib", [0, 64])
def test_full_kv_cache_evicts_idle_slots(sf_make_engine: MakeEngine, park_mib: int) -> None:
    engine = sf_make_engine(context_size=256, kv_tokens=256, park_mib=park_mib)
    a = [ord("a")] * 200
    b = [ord("b")] * 200
    first = generate(engine, a, max_tokens=2, seed=1, retain=True)
    assert first.finished.reason == "length"
    run = generate(engine, b, max_tokens=2, seed=1)  # needs a's cells
    assert run.finished.reason == "length"
    again = generate(engine, a, max_tokens=2, seed=1)
    if park_mib:  # a was parked in host memory, then copied back
        assert again.prompt.cached_tokens == len(a) - 1
        assert engine.stats()["restored"] == 1
        assert again.tokens == first.tokens
    else:
        assert again.prompt.cached_tokens == 0


def test_idle_conversations_are_parked_and_restored_exactly(sf_make_engine: MakeEngine) -> None:
    engine = sf_make_engine(cache_slots=4, kv_tokens=UNIFIED)
    long_a = chat_prompt(engine, "alpha " * 80)  # more own cells than stay resident
    first, _ = _run(engine, long_a, seed=5, max_tokens=8, retain=True)
    assert engine.stats()["parked"] == 0
    _run(engine, chat_prompt(engine, "beta"), seed=5, max_tokens=2)  # other work parks a
    assert engine.stats()["parked"] == 1
    again, evaluated = _run(engine, long_a, seed=5, max_tokens=8)
    assert engine.stats()["restored"] == 1
    assert again.prompt.cached_tokens == len(long_a) - 1 and evaluated == 1
    assert again.tokens == first.tokens  # the restored KV is the evaluated one


def test_with_a_stream_per_slot_idle_conversations_stay_resident(
    sf_make_engine: MakeEngine,
) -> None:
    engine = sf_make_engine(cache_slots=4)  # the default layout: a KV stream per slot
    long_a = chat_prompt(engine, "alpha " * 80)
    first, _ = _run(engine, long_a, seed=5, max_tokens=8, retain=True)
    _run(engine, chat_prompt(engine, "beta"), seed=5, max_tokens=2)  # costs a nothing now
    again, evaluated = _run(engine, long_a, seed=5, max_tokens=8)
    stats = engine.stats()
    assert stats["parked"] == stats["restored"] == stats["states_saved"] == 0
    assert again.prompt.cached_tokens == len(long_a) - 1 and evaluated == 1
    assert again.tokens == first.tokens


def test_a_branch_copied_into_another_stream_is_the_evaluated_one(
    sf_make_engine: MakeEngine,
) -> None:
    engine = sf_make_engine(cache_slots=4)
    trunk = chat_prompt(engine, "alpha " * 60)
    run = generate(engine, trunk, seed=5, max_tokens=8, retain=True)
    held = trunk + run.tokens[:-1]  # what the trunk's slot holds (its last token is not fed)
    branch = held + engine.tokenize("\n<|im_start|>user\nmore<|im_end|>\n")
    in_place, evaluated = _run(engine, branch, seed=9, max_tokens=8)
    assert in_place.prompt.cached_tokens == len(held) and evaluated == len(branch) - len(held)
    # The same branch again: its slot now holds more than the branch, so the branch is
    # copied into another slot's stream (whole, then trimmed) and only its last token runs.
    copied, evaluated = _run(engine, branch, seed=9, max_tokens=8)
    assert copied.prompt.cached_tokens == len(branch) - 1 and evaluated == 1
    assert copied.tokens == in_place.tokens  # the copied cells are the evaluated ones
    assert engine.stats()["parked"] == engine.stats()["restored"] == 0


def test_copies_of_different_sizes_through_the_kept_buffer_are_exact(
    sf_make_engine: MakeEngine,
) -> None:
    # Copies between streams go through one buffer kept from copy to copy: a smaller
    # state after a larger one must restore only its own bytes.
    engine = sf_make_engine(cache_slots=4)
    for words in (90, 30):
        trunk = chat_prompt(engine, f"gamma{words} " * words)
        run = generate(engine, trunk, seed=words, max_tokens=8, retain=True)
        branch = trunk + run.tokens[:-1] + engine.tokenize("\n<|im_start|>user\nmore<|im_end|>\n")
        in_place = generate(engine, branch, seed=3, max_tokens=8)
        copied, evaluated = _run(engine, branch, seed=3, max_tokens=8)
        assert copied.prompt.cached_tokens == len(branch) - 1 and evaluated == 1
        assert copied.tokens == in_place.tokens


@pytest.mark.parametrize("layout", ["streams", "unified"])
def test_a_short_shared_prefix_is_copied_only_in_a_unified_cache(
    sf_make_engine: MakeEngine, layout: str
) -> None:
    # Between streams a copy moves a whole window of cells; a chat template's opening
    # is cheaper to evaluate again. In a unified cache a copy only tags the cells.
    engine = sf_make_engine(cache_slots=4, kv_tokens=UNIFIED if layout == "unified" else None)
    kept = chat_prompt(engine, "alpha " * 40)
    first = generate(engine, kept, seed=1, max_tokens=2, retain=True)
    other = chat_prompt(engine, "beta")
    shared = next(i for i, (a, b) in enumerate(zip(kept, other, strict=False)) if a != b)
    run, evaluated = _run(engine, other, seed=1, max_tokens=2)
    assert 0 < shared < 32
    assert run.prompt.cached_tokens == (shared if layout == "unified" else 0)
    assert evaluated == len(other) - run.prompt.cached_tokens
    again, evaluated = _run(engine, kept, seed=1, max_tokens=2)  # its slot is untouched
    assert again.prompt.cached_tokens == len(kept) - 1 and again.tokens == first.tokens


def test_short_idle_conversations_stay_resident(sf_make_engine: MakeEngine) -> None:
    engine = sf_make_engine(cache_slots=4)
    short = chat_prompt(engine, "hi")
    _run(engine, short, seed=1, max_tokens=2)
    _run(engine, chat_prompt(engine, "other"), seed=1, max_tokens=2)
    again, _ = _run(engine, short, seed=1, max_tokens=2)
    assert again.prompt.cached_tokens == len(short) - 1
    assert engine.stats()["parked"] == engine.stats()["restored"] == 0


def test_concurrent_requests_share_a_cached_prefix(sf_make_engine: MakeEngine) -> None:
    engine = sf_make_engine()
    system = engine.tokenize("<|im_start|>system\n" + "You are terse. " * 10 + "<|im_end|>\n")
    generate(engine, system, max_tokens=1)

    async def burst() -> list[Generation]:
        prompts = [system + chat_prompt(engine, f"q{i}") for i in range(4)]
        return await asyncio.gather(
            *(agenerate(engine, p, seed=i, max_tokens=5) for i, p in enumerate(prompts))
        )

    runs = asyncio.run(burst())
    assert all(r.prompt.cached_tokens >= len(system) - 1 for r in runs)


@dataclass(frozen=True)
class _ClosingRequest(GenerateRequest):
    """A request carrying the tokens that close a turn after <|im_end|>."""

    cache_suffix: tuple[int, ...] = ()


def test_cache_suffix_makes_the_whole_stored_turn_warm(sf_make_engine: MakeEngine) -> None:
    engine = sf_make_engine()
    newline = tuple(engine.tokenize("\n"))
    prompt = chat_prompt(engine, "Remember me")

    async def first_turn() -> Generation:
        for seed in range(20):  # a seed whose answer ends on <|im_end|>
            request = _ClosingRequest(
                tuple(prompt), SamplingParams(seed=seed, max_tokens=200), cache_suffix=newline
            )
            run = Generation([e async for e in engine.generate(request)])
            if run.finished.reason == "stop":
                return run
        raise AssertionError("no seed stopped")

    first = asyncio.run(first_turn())
    stored = prompt + first.tokens + list(newline)  # what the session layer keeps
    nxt = stored + engine.tokenize("<|im_start|>user\nagain<|im_end|>\n<|im_start|>assistant\n")
    second, evaluated = _run(engine, nxt, seed=1, max_tokens=4)
    assert second.prompt.cached_tokens == len(stored)
    assert evaluated == len(nxt) - len(stored)

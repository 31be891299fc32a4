"""When idle conversations are parked and written: only when their cells are in the way.

Asserted by the cache's counters (parks, restores, states saved, slots dropped,
disk writes), never by timing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from sf_engine_helpers import Generation, generate

from jupyter_superfluid.engine.local.llama import LlamaEngine

MakeEngine = Callable[..., LlamaEngine]
SEED = 3
QUIET = 3600.0  # a write-behind delay no test outlasts: nothing is written before close


def _counters(engine: LlamaEngine) -> dict[str, int]:
    stats = engine.stats()
    keys = ("parked", "restored", "states_saved", "slots_dropped", "disk_writes")
    return {k: int(stats.get(k, 0)) for k in keys}  # type: ignore[call-overload]


def _held(prompt: list[int], run: Generation) -> list[int]:
    """What the KV holds after a run cut at max_tokens (its last token is not fed)."""
    return prompt + run.tokens[:-1]


def test_a_conversation_continued_while_resident_is_continued_in_place(
    sf_make_engine: MakeEngine, tmp_path: Path
) -> None:
    engine = sf_make_engine(cache_slots=2, kv_dir=tmp_path / "kv", kv_write_delay=QUIET)
    prompt, held = [ord("a")] * 400, list[int]()
    for turn in range(4):  # each turn continues the last, back to back
        run = generate(engine, prompt, seed=SEED, max_tokens=3, retain=True)
        if turn:
            assert run.prompt.cached_tokens == len(held)
        held = _held(prompt, run)
        prompt = held + run.tokens[-1:] + [ord("b") + turn] * 8
    assert _counters(engine) == dict.fromkeys(_counters(engine), 0)  # no copy, no write


def test_branches_past_the_slots_drop_their_tails_instead_of_parking(
    sf_make_engine: MakeEngine,
) -> None:
    engine = sf_make_engine(cache_slots=2)
    history = [ord("h")] * 600
    base = generate(engine, history, seed=SEED, max_tokens=3, retain=True)
    stem = _held(history, base) + base.tokens[-1:]
    for branch in range(5):  # more branches than slots, each a stored turn
        prompt = stem + [ord("p") + branch] * 16
        run = generate(engine, prompt, seed=SEED, max_tokens=3, retain=True)
        assert run.prompt.cached_tokens >= len(stem) - 1
    counters = _counters(engine)
    assert counters["parked"] == counters["restored"] == counters["states_saved"] == 0
    assert counters["slots_dropped"] >= 3  # the history stayed in the other slot


def test_idle_cells_fewer_than_the_running_ones_stay_resident(
    sf_make_engine: MakeEngine,
) -> None:
    engine = sf_make_engine(cache_slots=4)
    idle = [ord("i")] * 300
    first = generate(engine, idle, seed=SEED, max_tokens=3, retain=True)
    generate(engine, [ord("r")] * 900, seed=SEED, max_tokens=3)  # no pressure: room for both
    assert _counters(engine)["parked"] == 0
    again = generate(engine, _held(idle, first) + first.tokens[-1:], seed=SEED, max_tokens=3)
    assert again.prompt.cached_tokens == len(_held(idle, first))
    assert _counters(engine)["restored"] == 0


def test_idle_cells_are_parked_when_the_cells_are_needed(sf_make_engine: MakeEngine) -> None:
    engine = sf_make_engine(cache_slots=4, context_size=1024, kv_tokens=1024)
    idle = [ord("i")] * 300
    first = generate(engine, idle, seed=SEED, max_tokens=3, retain=True)
    # 400 prompt tokens and up to 400 more do not fit beside the idle 300.
    generate(engine, [ord("r")] * 400, seed=SEED, max_tokens=400)
    assert _counters(engine)["parked"] == 1
    again = generate(engine, _held(idle, first) + first.tokens[-1:], seed=SEED, max_tokens=3)
    assert again.prompt.cached_tokens == len(_held(idle, first))
    assert _counters(engine)["restored"] == 1


def test_a_kept_state_is_written_behind_once_idle_or_at_close(
    sf_make_engine: MakeEngine, tmp_path: Path
) -> None:
    kv = tmp_path / "kv"
    engine = sf_make_engine(kv_dir=kv, kv_write_delay=QUIET)
    prompt = [ord("k")] * 200
    run = generate(engine, prompt, seed=SEED, max_tokens=3, retain=True)
    time.sleep(0.5)  # idle, but not for the delay
    assert engine.stats()["disk_writes"] == 0 and engine.stats()["unsaved"] == 1
    engine.close_sync()  # closing writes what is pending

    reopened = sf_make_engine(kv_dir=kv)
    assert reopened.stats()["disk_states"] == 1
    nxt = _held(prompt, run) + run.tokens[-1:] + [ord("n")] * 8
    warm = generate(reopened, nxt, seed=SEED, max_tokens=3)
    assert warm.prompt.cached_tokens == len(_held(prompt, run))
    assert reopened.stats()["restored_from_disk"] == 1

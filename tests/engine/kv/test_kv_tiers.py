"""The KV tiers on real engines: what is kept, the disk tier across reloads, bad files, bounds."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from sf_engine_helpers import UNIFIED, Generation, chat_prompt, generate

from jupyter_superfluid.engine.local.kv.disk_file import SUFFIX, file_name
from jupyter_superfluid.engine.local.llama import LlamaEngine

MakeEngine = Callable[..., LlamaEngine]
SEED = 11


def _wait_on_disk(engine: LlamaEngine, states: int, writes: int = 0) -> None:
    """Until the disk tier holds ``states`` files, made ``writes`` writes, and has none pending."""
    deadline = time.monotonic() + 60
    while True:
        stats = engine.stats()
        done = stats["disk_states"] == states and stats["disk_writes"] >= writes
        if done and stats["disk_pending"] == 0:
            return
        assert time.monotonic() < deadline, f"disk tier never settled at {states}: {stats}"
        time.sleep(0.02)


def _held(run: Generation, prompt: list[int]) -> list[int]:
    """The tokens the KV holds after a run that hit max_tokens (its last token is not fed)."""
    assert run.finished.reason == "length"
    return prompt + run.tokens[:-1]


def _files(kv: Path) -> list[Path]:
    return sorted(kv.glob(f"*/*{SUFFIX}"))


def _conversation(engine: LlamaEngine, name: str, words: int = 80) -> list[int]:
    return chat_prompt(engine, f"{name} " * words)


def _next_turn(engine: LlamaEngine, prompt: list[int], run: Generation) -> list[int]:
    return prompt + run.tokens + engine.tokenize("<|im_start|>user\nmore<|im_end|>\n")


def test_a_retained_turn_is_restored_from_disk_after_a_reload(
    sf_make_engine: MakeEngine, tmp_path: Path
) -> None:
    kv = tmp_path / "kv"
    first_engine = sf_make_engine(kv_dir=kv)
    prompt = _conversation(first_engine, "alpha")
    first = generate(first_engine, prompt, seed=SEED, max_tokens=6, retain=True)
    nxt = _next_turn(first_engine, prompt, first)
    _wait_on_disk(first_engine, 1)  # written while the engine was idle
    first_engine.close_sync()

    engine = sf_make_engine(kv_dir=kv)
    assert engine.stats()["disk_states"] == 1
    warm = generate(engine, nxt, seed=SEED, max_tokens=6)
    assert warm.prompt.cached_tokens == len(_held(first, prompt))
    assert engine.stats()["restored_from_disk"] == 1
    assert engine.prompt_tokens_evaluated == len(nxt) - warm.prompt.cached_tokens
    reference = generate(sf_make_engine(), nxt, seed=SEED, max_tokens=6)  # evaluated cold
    assert reference.prompt.cached_tokens == 0
    assert warm.tokens == reference.tokens


def test_a_state_saved_in_another_kv_layout_is_not_restored(
    sf_make_engine: MakeEngine, tmp_path: Path
) -> None:
    kv = tmp_path / "kv"
    unified = sf_make_engine(kv_dir=kv, kv_tokens=UNIFIED)  # one cache: a state lists 1 stream
    prompt = _conversation(unified, "alpha")
    first = generate(unified, prompt, seed=SEED, max_tokens=6, retain=True)
    _wait_on_disk(unified, 1)
    unified.close_sync()

    engine = sf_make_engine(kv_dir=kv)  # a stream per slot: its states list 8
    assert engine.stats()["disk_states"] == 0
    again = generate(engine, _next_turn(engine, prompt, first), seed=SEED, max_tokens=6)
    assert again.prompt.cached_tokens == 0
    assert engine.stats()["restores_invalid"] == engine.stats()["restored_from_disk"] == 0


def _tamper(kind: str, file: Path, kv: Path, other: Path) -> None:
    """Spoil the KV file of a conversation in one of four ways."""
    if kind == "corrupted":
        data = bytearray(file.read_bytes())
        data[-10] ^= 0xFF  # inside the state: only the digest can tell
        file.write_bytes(bytes(data))
    elif kind == "truncated":
        file.write_bytes(file.read_bytes()[:-100])
    elif kind == "other_tokens":
        other.replace(file)  # another conversation's state under this one's name
    elif kind == "other_model":
        # The state of this conversation as another model wrote it, in this model's place.
        foreign = next(p for p in _files(kv) if p.parent != file.parent and p.name == file.name)
        shutil.copyfile(foreign, file)


@pytest.mark.parametrize("kind", ["corrupted", "truncated", "other_tokens", "other_model"])
def test_a_bad_kv_file_is_detected_and_ignored(
    sf_make_engine: MakeEngine, tmp_path: Path, kind: str
) -> None:
    kv = tmp_path / "kv"
    writer = sf_make_engine(kv_dir=kv)
    prompt = _conversation(writer, "alpha")
    other_prompt = _conversation(writer, "omega")
    first = generate(writer, prompt, seed=SEED, max_tokens=6, retain=True)
    nxt = _next_turn(writer, prompt, first)
    generate(writer, other_prompt, seed=SEED, max_tokens=6, retain=True)
    _wait_on_disk(writer, 2)
    writer.close_sync()
    held = tuple(_held(first, prompt))
    if kind == "other_model":  # the state of the same token ids, from another model
        foreign = sf_make_engine("superfluid/tiny-qwen3", kv_dir=kv)
        generate(foreign, list(held), seed=SEED, max_tokens=1, retain=True)
        _wait_on_disk(foreign, 1)
        foreign.close_sync()
    own = [p for p in _files(kv) if p.parent.name.startswith("superfluid_tiny-chatml")]
    file = next(p for p in own if p.name == file_name(held))
    other = next(p for p in own if p != file)
    _tamper(kind, file, kv, other)

    engine = sf_make_engine(kv_dir=kv)
    run = generate(engine, nxt, seed=SEED, max_tokens=6)
    assert run.prompt.cached_tokens == 0  # evaluated: nothing could be vouched for
    assert engine.stats()["disk_rejected"] == 1
    assert engine.stats()["restored_from_disk"] == 0
    assert not file.exists()  # a bad file is deleted
    reference = generate(sf_make_engine(), nxt, seed=SEED, max_tokens=6)
    assert run.tokens == reference.tokens


def test_an_unfinished_write_is_never_read(sf_make_engine: MakeEngine, tmp_path: Path) -> None:
    kv = tmp_path / "kv"
    writer = sf_make_engine(kv_dir=kv)
    prompt = _conversation(writer, "alpha")
    first = generate(writer, prompt, seed=SEED, max_tokens=6, retain=True)
    nxt = _next_turn(writer, prompt, first)
    _wait_on_disk(writer, 1)
    writer.close_sync()
    (file,) = _files(kv)
    # What a crash in the middle of a write leaves: the temporary name, never the real one.
    partial = file.parent / f".tmp-{file.name}-1-1"
    file.rename(partial)
    partial.write_bytes(partial.read_bytes()[:500])

    engine = sf_make_engine(kv_dir=kv)
    assert not partial.exists()
    assert engine.stats()["disk_states"] == 0
    run = generate(engine, nxt, seed=SEED, max_tokens=6)
    assert run.prompt.cached_tokens == 0


def test_the_disk_bound_evicts_the_least_recently_used(
    sf_make_engine: MakeEngine, tmp_path: Path
) -> None:
    kv = tmp_path / "kv"
    writer = sf_make_engine(kv_dir=kv, disk_mib=1)
    prompts = {name: _conversation(writer, name, words=170) for name in ("alpha", "beta", "gamma")}
    runs = {}
    for name in ("alpha", "beta"):
        runs[name] = generate(writer, prompts[name], seed=SEED, max_tokens=4, retain=True)
        _wait_on_disk(writer, len(runs))
    writer.close_sync()
    sizes = [p.stat().st_size for p in _files(kv)]
    assert 2 * max(sizes) < 2**20 < 3 * min(sizes)  # one MiB holds two of them, not three

    engine = sf_make_engine(kv_dir=kv, disk_mib=1)
    # A one-off continuation of alpha reads its file (a use), and adds none.
    alpha_next = _next_turn(engine, prompts["alpha"], runs["alpha"])
    assert generate(engine, alpha_next, seed=SEED, max_tokens=4).prompt.cached_tokens > 0
    runs["gamma"] = generate(engine, prompts["gamma"], seed=SEED, max_tokens=4, retain=True)
    _wait_on_disk(engine, 2, writes=1)
    assert engine.stats()["disk_evicted"] == 1
    engine.close_sync()
    held = {name: tuple(_held(runs[name], prompts[name])) for name in runs}
    names = {p.name for p in _files(kv)}
    assert names == {file_name(held["alpha"]), file_name(held["gamma"])}  # beta went


def test_one_off_turns_are_not_parked(sf_make_engine: MakeEngine, tmp_path: Path) -> None:
    engine = sf_make_engine(cache_slots=4, kv_dir=tmp_path / "kv", kv_tokens=UNIFIED)
    one_off = _conversation(engine, "alpha")  # more own cells than stay resident
    generate(engine, one_off, seed=SEED, max_tokens=6)
    generate(engine, _conversation(engine, "beta", words=4), seed=SEED, max_tokens=2)
    assert engine.stats()["parked"] == engine.stats()["ram_states"] == 0
    # A turn that can be continued is written; the one-offs are not.
    kept = _conversation(engine, "gamma")
    run = generate(engine, kept, seed=SEED, max_tokens=6, retain=True)
    _wait_on_disk(engine, 1, writes=1)
    assert [p.name for p in _files(tmp_path / "kv")] == [file_name(tuple(_held(run, kept)))]
    again = generate(engine, one_off, seed=SEED, max_tokens=6)
    assert again.prompt.cached_tokens < 32  # its own cells were dropped, not kept


def test_a_prefix_that_recurs_is_kept(sf_make_engine: MakeEngine) -> None:
    engine = sf_make_engine(cache_slots=4, kv_tokens=UNIFIED)
    shared = engine.tokenize("<|im_start|>system\n" + "Be brief. " * 120 + "<|im_end|>\n")
    for question in ("first", "second"):
        generate(engine, shared + chat_prompt(engine, question), seed=SEED, max_tokens=2)
    # Other work moves the idle one-offs out: their shared instructions are kept, once.
    generate(engine, _conversation(engine, "gamma", words=200), seed=SEED, max_tokens=2)
    assert engine.stats()["parked"] == 1 and engine.stats()["ram_states"] == 1
    third = generate(engine, shared + chat_prompt(engine, "third"), seed=SEED, max_tokens=2)
    assert third.prompt.cached_tokens >= len(shared) // 32 * 32


def test_an_unusable_kv_directory_costs_warmth_not_the_model(
    sf_make_engine: MakeEngine, tmp_path: Path
) -> None:
    blocked = tmp_path / "kv"
    blocked.write_text("a file where the directory should be")
    engine = sf_make_engine(kv_dir=blocked)
    assert "disk_states" not in engine.stats()
    run = generate(engine, _conversation(engine, "alpha"), seed=SEED, max_tokens=3, retain=True)
    assert run.finished.reason == "length"

"""Warm from disk: a conversation continued after a restart, a kill -9 or an engine crash.

The stored conversation's KV state reaches ``<sessions>/kv/`` while the server
is idle; whatever ends the engine, the next continuation restores it from
there: ``cached_tokens`` is what an uninterrupted server reports, and the
seeded answer is the uninterrupted server's.
"""

from __future__ import annotations

import os
import signal

import httpx
import openai
import pytest
from support.engine_processes import engine_children, wait_until
from support.no_eos import EOS_ID

CHATML = "superfluid/tiny-chatml"
ENDS_SOON = {str(EOS_ID): 3.0}
OPENING = "Remember these words: " + "cell kernel notebook stream " * 40


def client_for(server) -> openai.OpenAI:  # type: ignore[no-untyped-def]
    return openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0, timeout=120)


def first_turn(client: openai.OpenAI):  # type: ignore[no-untyped-def]
    """A stored turn that ends normally (so it is continued warm), and its seed."""
    for seed in range(40):
        r = client.responses.create(
            model=CHATML,
            input=OPENING,
            max_output_tokens=80,
            extra_body={"seed": seed, "logit_bias": ENDS_SOON},
        )
        if r.status == "completed":
            return r, seed
    raise AssertionError("no seed ended the turn")


def next_turn(client: openai.OpenAI, previous: str):  # type: ignore[no-untyped-def]
    return client.responses.create(
        previous_response_id=previous,
        input="Which words were they?",
        max_output_tokens=12,
        extra_body={"seed": 99},
    )


def engine_stats(server) -> dict:  # type: ignore[no-untyped-def]
    r = httpx.get(f"{server.base_url}/models/{CHATML}", timeout=30)
    return r.json()["superfluid"]


def wait_on_disk(server) -> None:  # type: ignore[no-untyped-def]
    """Until the idle engine has written the conversation's state."""

    def written() -> bool:
        stats = engine_stats(server)
        return stats.get("disk_states", 0) >= 1 and stats.get("disk_pending") == 0

    wait_until(written, "the KV state reached the disk")


@pytest.mark.parametrize("interruption", ["restart", "kill -9", "engine crash"])
def test_a_conversation_continues_warm_from_disk(sf_start_standalone, interruption: str) -> None:  # type: ignore[no-untyped-def]
    reference = sf_start_standalone()
    client = client_for(reference)
    first, seed = first_turn(client)
    expected = next_turn(client, first.id)
    reference.stop()
    stored = first.usage.input_tokens + first.usage.output_tokens
    assert expected.usage.input_tokens_details.cached_tokens >= stored  # warm, uninterrupted

    server = sf_start_standalone()
    client = client_for(server)
    again, again_seed = first_turn(client)
    assert again_seed == seed and again.output_text == first.output_text
    wait_on_disk(server)
    if interruption == "engine crash":
        (pid,) = engine_children(server.process.pid)
        os.kill(pid, signal.SIGKILL)
        wait_until(lambda: engine_children(server.process.pid) not in ([], [pid]), "a new engine")
    else:
        server.stop(signal.SIGKILL if interruption == "kill -9" else None)
        server = sf_start_standalone(sessions_dir=server.sessions_dir)
        client = client_for(server)
    continued = next_turn(client, again.id)
    cached = continued.usage.input_tokens_details.cached_tokens
    assert cached == expected.usage.input_tokens_details.cached_tokens
    assert continued.output_text == expected.output_text
    assert engine_stats(server)["restored_from_disk"] == 1


def test_the_models_endpoint_reports_both_tiers(sf_start_standalone) -> None:  # type: ignore[no-untyped-def]
    server = sf_start_standalone("--cache-disk=64")
    client = client_for(server)
    first_turn(client)
    wait_on_disk(server)
    stats = engine_stats(server)
    for key in ("ram_states", "ram_bytes", "disk_states", "disk_bytes", "parked", "restored"):
        assert isinstance(stats[key], int), key
    assert stats["disk_bytes"] > 0
    kv = server.sessions_dir / "kv"
    on_disk = sum(p.stat().st_size for p in kv.rglob("*.kv"))
    assert on_disk == stats["disk_bytes"]


def test_no_disk_tier_with_cache_disk_zero(sf_start_standalone) -> None:  # type: ignore[no-untyped-def]
    server = sf_start_standalone("--cache-disk=0")
    first_turn(client_for(server))
    assert "disk_states" not in engine_stats(server)
    assert not (server.sessions_dir / "kv").exists()  # a disk tier makes it when it starts

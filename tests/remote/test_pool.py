"""A pool of real llama-servers behind one model id (``ID=llama-server:URL,URL``).

Which replica served what is read from superfluid's ``/v1/models`` (each replica's
health, in-flight and pinned-conversation counts) and from each remote's own
``/metrics``; warmth is the remote's own count (``cached_tokens``). Nothing here looks
at a tiny model's text.
"""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from support.no_eos import NO_EOS_WIRE
from support.slow_model import slow_model

from jupyter_superfluid.pytest_plugin import StandaloneServer, start_standalone

from .helpers import REMOTE_KEY, RemoteServer
from .test_remote_over_http import client_for, completed, delta


def start_over_pool(
    model_cache: Path, workdir: Path, remotes: Sequence[RemoteServer], *args: str
) -> StandaloneServer:
    """A standalone superfluid serving ``remotes`` as one model, ``big``."""
    spec = "big=llama-server:" + ",".join(r.url for r in remotes)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LLAMA_API_KEY", REMOTE_KEY)  # read by the server process it starts
        return start_standalone(model_cache, workdir, *args, models=(spec,))


def replicas(server: StandaloneServer) -> dict[str, dict[str, Any]]:
    """The pool's replicas as ``/v1/models/big`` shows them, by URL."""
    model = httpx.get(server.base_url + "/models/big", timeout=30).json()
    return {r["url"]: r for r in model["superfluid"]["replicas"]}


def wait_for(server: StandaloneServer, check: Callable[[dict], bool], timeout: float = 60):
    """The replicas once ``check(replicas)`` holds (fails past ``timeout``)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        shown = replicas(server)
        if check(shown):
            return shown
        time.sleep(0.2)
    raise AssertionError(f"never so: {shown}")


@pytest.fixture
def pool_of_two(start_remote, sf_model_cache: Path, tmp_path: Path):
    """Two fresh tiny-chatml remotes and a superfluid serving them as ``big``."""
    remotes = [start_remote("superfluid/tiny-chatml") for _ in range(2)]
    server = start_over_pool(sf_model_cache, tmp_path, remotes)
    yield server, remotes
    server.stop()
    for remote in remotes:
        remote.stop()


def test_continuations_stay_on_one_replica_and_are_warm(pool_of_two):
    server, remotes = pool_of_two
    client = client_for(server)
    previous = completed(client, model="big", input="My name is Ada.")
    (home,) = [url for url, r in replicas(server).items() if r["conversations"] == 1]
    here, other = sorted(remotes, key=lambda r: r.url != home)
    for turn in ("Name?", "Again?"):
        before = other.wait_idle()
        r = completed(client, model="big", previous_response_id=previous.id, input=turn)
        # Served by the replica that holds the conversation, warm by its own count.
        assert r.usage.input_tokens_details.cached_tokens > previous.usage.input_tokens
        assert delta(before, other.wait_idle(), "tokens_predicted_total") == 0
        previous = r
    shown = replicas(server)
    assert shown[here.url]["conversations"] == 1 and shown[other.url]["conversations"] == 0
    assert all(s["health"] == "up" and s["in_flight"] == 0 for s in shown.values())
    listed = httpx.get(server.url + "/superfluid/v1/models/big", timeout=30).json()
    assert {x["url"] for x in listed["replicas"]} == {here.url, other.url}


def test_new_conversations_go_to_the_least_loaded_replica(
    start_remote, sf_model_cache: Path, tmp_path: Path
):
    remotes = [start_remote(slow_model(sf_model_cache), slots=1) for _ in range(2)]
    server = start_over_pool(sf_model_cache, tmp_path, remotes)
    body = {"model": "big", "input": "go on", "stream": True, "max_output_tokens": 4000}
    try:
        with httpx.stream(
            "POST", server.base_url + "/responses", json={**body, "logit_bias": NO_EOS_WIRE}
        ) as stream:
            lines = stream.iter_lines()  # held: a dropped iterator closes the stream
            for line in lines:
                if line.startswith("data: ") and "output_text.delta" in line:
                    break
            busy = replicas(server)
            (first,) = [url for url, r in busy.items() if r["in_flight"] == 1]
            assert [r["in_flight"] for url, r in busy.items() if url != first] == [0]
            second = client_for(server).responses.create(
                model="big", input="a new one", max_output_tokens=4
            )
            assert second.status in ("completed", "incomplete")
            shown = replicas(server)
        # One conversation each: the second went to the replica with nothing in flight.
        assert sorted(r["conversations"] for r in shown.values()) == [1, 1]
        assert all(r["served"] == 1 for r in shown.values())
        wait_for(server, lambda rs: all(r["in_flight"] == 0 for r in rs.values()))
    finally:
        server.stop()
        for remote in remotes:
            remote.stop()


def test_failover_then_the_replica_back_up_is_used_again(pool_of_two):
    server, remotes = pool_of_two
    client = client_for(server)
    first = completed(client, model="big", input="My name is Ada.")
    (home,) = [url for url, r in replicas(server).items() if r["conversations"] == 1]
    killed, survivor = sorted(remotes, key=lambda r: r.url != home)
    killed.stop(signal.SIGKILL)
    # The next turn is served by the other replica: cold, and stored as a whole turn.
    second = completed(client, model="big", previous_response_id=first.id, input="Name?")
    assert second.usage.input_tokens_details.cached_tokens < first.usage.input_tokens
    shown = replicas(server)
    down = shown[killed.url]
    assert down["health"] == "down" and killed.url in down["last_error"]
    assert down["next_retry_in_s"] is not None and down["conversations"] == 0
    assert shown[survivor.url]["health"] == "up" and shown[survivor.url]["conversations"] == 1
    # Its next turn stays there, warm now.
    third = client.responses.create(
        model="big", previous_response_id=second.id, input="And?", max_output_tokens=8
    )
    assert third.usage.input_tokens_details.cached_tokens > second.usage.input_tokens
    # Back up (a fresh, cold remote on the same port): used again after its retry.
    killed.start()
    wait_for(server, lambda rs: rs[killed.url]["health"] == "up")
    before = killed.wait_idle()
    fresh = client.responses.create(model="big", input="Someone new.", max_output_tokens=4)
    assert fresh.status in ("completed", "incomplete")
    assert delta(before, killed.wait_idle(), "tokens_predicted_total") > 0
    assert replicas(server)[killed.url]["conversations"] == 1


def test_every_replica_down_is_503_naming_them_all(pool_of_two):
    server, remotes = pool_of_two
    client = client_for(server)
    assert client.responses.create(model="big", input="a", max_output_tokens=4).status
    for remote in remotes:
        remote.stop(signal.SIGKILL)
    for stream in (False, True):
        with pytest.raises(openai.APIStatusError) as caught:
            client.responses.create(model="big", input="b", max_output_tokens=4, stream=stream)
        assert caught.value.status_code == 503
        assert caught.value.body["code"] == "engine_unavailable"
        assert all(r.url in caught.value.body["message"] for r in remotes)
    shown = replicas(server)
    assert all(r["health"] == "down" for r in shown.values())
    remotes[1].start()
    wait_for(server, lambda rs: rs[remotes[1].url]["health"] == "up")
    again = client.responses.create(model="big", input="c", max_output_tokens=4)
    assert again.status in ("completed", "incomplete")


def test_a_replica_serving_another_model_is_refused(
    remote_chatml: RemoteServer, remote_qwen: RemoteServer, sf_model_cache: Path, tmp_path: Path
):
    server = start_over_pool(sf_model_cache, tmp_path, [remote_chatml, remote_qwen])
    try:
        r = client_for(server).responses.create(model="big", input="hi", max_output_tokens=4)
        assert r.status in ("completed", "incomplete")
        shown = replicas(server)
        refused = shown[remote_qwen.url]
        assert refused["health"] == "refused" and refused["served"] == 0
        assert "serves another model than " + remote_chatml.url in refused["last_error"]
        assert shown[remote_chatml.url]["health"] == "up"
        listing = httpx.get(server.url + "/superfluid/v1/models", timeout=30).json()
        (big,) = [m for m in listing["data"] if m["id"] == "big"]
        assert json.dumps(big["replicas"]) and big["state"] == "loaded"
    finally:
        server.stop()

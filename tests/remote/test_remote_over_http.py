"""Superfluid serving real llama-server remotes (``ID=llama-server:URL``) through its protocols.

The standalone server is started with ``--model chatml=llama-server:URL`` and
``--model qwen=llama-server:URL``; the openai SDK and plain HTTP talk to it. What
the remote did is read from its own ``/metrics``.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

import httpx
import openai
import pytest
from support.media_samples import data_url, png
from support.no_eos import NO_EOS_WIRE
from support.slow_model import slow_model

from jupyter_superfluid.pytest_plugin import StandaloneServer
from jupyter_superfluid.store import Store

from . import checks
from .conftest import start_over_remotes
from .helpers import SLOT_CONTEXT, RemoteServer


def client_for(server: StandaloneServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0, timeout=120)


def completed(client: openai.OpenAI, **kwargs):
    """A response that ended on its own (the tiny models stop after a few dozen tokens)."""
    for seed in range(40):
        r = client.responses.create(max_output_tokens=120, extra_body={"seed": seed}, **kwargs)
        if r.status == "completed":
            return r
    raise AssertionError("no seed gave a completed response")


def delta(before: dict[str, float], after: dict[str, float], name: str) -> int:
    return int(after[name] - before[name])


def test_create_is_generated_by_the_remote(over_remotes, remote_chatml: RemoteServer):
    client = client_for(over_remotes)
    before = remote_chatml.wait_idle()
    r = client.responses.create(
        model="chatml",
        input="hello",
        max_output_tokens=16,
        extra_body={"seed": 3, "logit_bias": NO_EOS_WIRE},
    )
    after = remote_chatml.wait_idle()
    assert r.model == "chatml" and r.status == "incomplete"
    assert r.usage.output_tokens == 16 == delta(before, after, "tokens_predicted_total")
    evaluated = delta(before, after, "prompt_tokens_total")
    cached = delta(before, after, "prompt_tokens_cached_total")
    assert r.usage.input_tokens == evaluated + cached
    assert r.usage.input_tokens_details.cached_tokens == cached
    models = {m.id for m in client.models.list().data}
    assert models == {"chatml", "qwen", "slow"}


def test_stream_events_add_up_to_the_stored_response(over_remotes):
    checks.stream_adds_up_to_the_stored_response(client_for(over_remotes), "chatml")


def test_forced_tool_call(over_remotes):
    checks.forced_tool_call(client_for(over_remotes), "qwen")


def test_json_schema_output(over_remotes):
    checks.json_schema_output(client_for(over_remotes), "chatml")


def test_continuation_is_served_warm_by_the_remote(over_remotes, remote_chatml: RemoteServer):
    client = client_for(over_remotes)
    first = completed(client, model="chatml", input="My name is Ada.")
    before = remote_chatml.wait_idle()
    raw = client.responses.with_raw_response.create(
        model="chatml", previous_response_id=first.id, input="Name?", max_output_tokens=8
    )
    after = remote_chatml.wait_idle()
    second = raw.parse()
    cached = second.usage.input_tokens_details.cached_tokens
    # The count is the remote's own, and it covers the whole stored first turn's prompt.
    assert cached == delta(before, after, "prompt_tokens_cached_total")
    assert int(raw.headers["x-superfluid-warm"]) == cached
    assert cached > first.usage.input_tokens
    # The second prompt starts with the first turn exactly as stored (forked, not rebuilt).
    store = Store(over_remotes.sessions_dir, readonly=True)
    rec, rec2 = store.get_response(first.id), store.get_response(second.id)
    assert rec is not None and rec2 is not None
    stored = store.session_tokens(rec.session_id, rec.end)
    assert store.session_tokens(rec2.session_id, rec2.end)[: len(stored)] == stored


def test_disconnect_stops_the_remote(over_remotes, remote_slow: RemoteServer):
    before = remote_slow.wait_idle()
    body = {
        "model": "slow",
        "input": "go",
        "stream": True,
        "max_output_tokens": 4000,
        "logit_bias": NO_EOS_WIRE,
    }
    response_id = None
    with httpx.stream("POST", over_remotes.base_url + "/responses", json=body, timeout=60) as r:
        assert r.status_code == 200, r.read()
        for line in r.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                event = json.loads(line[6:])
                response_id = response_id or event.get("response", {}).get("id")
                if event["type"] == "response.output_text.delta":
                    break
    after = remote_slow.wait_idle()  # the remote stopped generating (or never stops)
    # It generated, and stopped long before its cap (~20 s of generating at full speed).
    assert response_id is not None and 0 < delta(before, after, "tokens_predicted_total") < 4000
    assert httpx.get(f"{over_remotes.base_url}/responses/{response_id}").status_code == 404


def test_chat_completions_and_lmsp_once(over_remotes):
    client = client_for(over_remotes)
    chat = client.chat.completions.create(
        model="chatml", messages=[{"role": "user", "content": "hi"}], max_tokens=12, seed=2
    )
    assert chat.choices[0].finish_reason in ("stop", "length")
    assert chat.usage.completion_tokens <= 12
    chunks = list(
        client.chat.completions.create(
            model="chatml",
            messages=[{"role": "user", "content": "hi"}],
            max_tokens=12,
            seed=2,
            stream=True,
        )
    )
    assert chunks[-1].choices[0].finish_reason in ("stop", "length")
    body = {
        "model": "chatml",
        "input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}
        ],
        "max_output_tokens": 8,
    }
    lmsp = httpx.post(over_remotes.url + "/lmsp/v1/responses", json=body, timeout=60)
    assert lmsp.status_code == 200 and lmsp.json()["status"] in ("completed", "incomplete")
    assert lmsp.json()["model"] == "chatml"


def test_images_are_refused_cleanly(over_remotes):
    url = data_url(png(8, 8, seed=1))
    with pytest.raises(openai.BadRequestError) as caught:
        client_for(over_remotes).chat.completions.create(
            model="chatml",
            messages=[
                {"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}}]}
            ],
        )
    assert caught.value.body["code"] == "unsupported_input"


def test_a_remote_that_goes_away_gives_503_then_recovers(
    start_remote, sf_model_cache: Path, tmp_path: Path
):
    remote = start_remote("superfluid/tiny-chatml")
    server = start_over_remotes(sf_model_cache, tmp_path, {"m": remote})
    client = client_for(server)
    try:
        assert client.responses.create(model="m", input="a", max_output_tokens=4).status
        remote.stop(signal.SIGKILL)
        for stream in (False, True):
            with pytest.raises(openai.APIStatusError) as caught:
                client.responses.create(model="m", input="b", max_output_tokens=4, stream=stream)
            assert caught.value.status_code == 503
            assert caught.value.body["code"] == "engine_unavailable"
            assert remote.url in caught.value.body["message"]
        remote.start()  # the same port, a fresh (cold) remote
        again = client.responses.create(model="m", input="c", max_output_tokens=4)
        assert again.status in ("completed", "incomplete")
    finally:
        server.stop()
        remote.stop()


def test_a_remote_dying_mid_stream_fails_the_stream(
    start_remote, sf_model_cache: Path, tmp_path: Path
):
    remote = start_remote(slow_model(sf_model_cache), slots=1)  # still generating when killed
    server = start_over_remotes(sf_model_cache, tmp_path, {"m": remote})
    body = {
        "model": "m",
        "input": "go",
        "stream": True,
        "max_output_tokens": 4000,
        "logit_bias": NO_EOS_WIRE,
    }
    try:
        events = []
        with httpx.stream("POST", server.base_url + "/responses", json=body, timeout=60) as r:
            for line in r.iter_lines():
                if line.startswith("data: ") and line != "data: [DONE]":
                    events.append(json.loads(line[6:]))
                    if events[-1]["type"] == "response.output_text.delta" and remote.process:
                        remote.stop(signal.SIGKILL)
        assert [e["type"] for e in events[-2:]] == ["error", "response.failed"]
        error = events[-2]
        assert error["code"] == "engine_unavailable" and remote.url in error["message"]
        listed = httpx.get(server.base_url + "/responses").json()["data"]
        assert listed == []  # nothing half-generated is stored
    finally:
        server.stop()
        remote.stop()


def test_stop_sequences_are_applied_here_and_stop_the_remote(over_remotes, remote_slow):
    before = remote_slow.wait_idle()
    chat = client_for(over_remotes).chat.completions.create(
        model="slow",
        messages=[{"role": "user", "content": "hi"}],
        max_tokens=4000,
        seed=1,
        stop=["e", "a", "o", " "],
        logit_bias=NO_EOS_WIRE,
    )
    after = remote_slow.wait_idle()
    text = chat.choices[0].message.content or ""
    assert chat.choices[0].finish_reason == "stop"
    assert not any(s in text for s in ("e", "a", "o", " "))
    # Closing the stream stopped the remote: a stop string comes within a few dozen
    # tokens, the cap only after ~20 s of generating at full speed (a cap of 300, 1.5 s,
    # left the outcome to how far this server's reading lagged behind the remote).
    assert delta(before, after, "tokens_predicted_total") < 4000


def test_a_hung_remote_times_out_instead_of_hanging(
    start_remote, sf_model_cache: Path, tmp_path: Path
):
    remote = start_remote(slow_model(sf_model_cache), slots=1)
    server = start_over_remotes(sf_model_cache, tmp_path, {"m": remote}, "--remote-timeout=2")
    body = {"model": "m", "input": "go", "stream": True, "max_output_tokens": 4000}
    body["logit_bias"] = NO_EOS_WIRE
    assert remote.process is not None
    try:
        events = []
        with httpx.stream("POST", server.base_url + "/responses", json=body, timeout=60) as r:
            for line in r.iter_lines():
                if line.startswith("data: ") and line != "data: [DONE]":
                    events.append(json.loads(line[6:]))
                    if events[-1]["type"] == "response.output_text.delta" and len(events) < 9:
                        remote.process.send_signal(signal.SIGSTOP)  # alive, but silent
        assert [e["type"] for e in events[-2:]] == ["error", "response.failed"]
        assert "did not answer in time" in events[-2]["message"]
        with pytest.raises(openai.APIStatusError) as caught:
            client_for(server).responses.create(model="m", input="b", max_output_tokens=4)
        assert caught.value.status_code == 503 and remote.url in caught.value.body["message"]
        remote.process.send_signal(signal.SIGCONT)
        again = client_for(server).responses.create(model="m", input="c", max_output_tokens=4)
        assert again.status in ("completed", "incomplete")
    finally:
        if remote.process is not None:
            remote.process.send_signal(signal.SIGCONT)
        server.stop()
        remote.stop()


def test_discovery_gives_the_remote_s_window(over_remotes):
    client_for(over_remotes).responses.create(model="chatml", input="x", max_output_tokens=2)
    lmsp = httpx.get(over_remotes.url + "/lmsp/v1/models/chatml", timeout=30).json()
    # The remote's per-slot window, not --ctx-size (which is for local models).
    assert (lmsp["state"], lmsp["context_window"]) == ("loaded", SLOT_CONTEXT)
    openai_side = httpx.get(over_remotes.base_url + "/models/chatml", timeout=30).json()
    assert openai_side["superfluid"]["context_size"] == SLOT_CONTEXT

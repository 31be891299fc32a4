"""Background responses through the openai SDK: poll, resume by sequence number (also after
a restart), cancel mid-generation (the engine stops), ownership by key."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import openai
import pytest
from support.engine_processes import settled_tokens
from support.no_eos import RUN_TO_CAP
from support.slow_model import slow_model

CHATML = "superfluid/tiny-chatml"
LIVE = ("queued", "in_progress")


def client_for(server, key: str = "unused") -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key=key, max_retries=0, timeout=120)


def poll(client: openai.OpenAI, response_id: str, timeout: float = 120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r = client.responses.retrieve(response_id)
        if r.status not in LIVE:
            return r
        time.sleep(0.05)
    raise AssertionError(f"{response_id} still {r.status}")


def start(client: openai.OpenAI, tokens: int = 24, **kw):
    return client.responses.create(
        model=kw.pop("model", CHATML),
        input=kw.pop("input", "tell me"),
        background=True,
        max_output_tokens=tokens,
        extra_body={**RUN_TO_CAP, **kw.pop("extra_body", {})},
        **kw,
    )


def dumps(events) -> list[dict]:
    return [e.model_dump(exclude_unset=True) for e in events]


def test_background_polls_to_completion(openai_client):
    r = start(openai_client)
    assert r.status in LIVE and r.background is True and r.output == []
    done = poll(openai_client, r.id)
    assert done.status == "incomplete" and done.background is True  # run to its cap
    assert done.usage.output_tokens == 24 and done.output[0].type == "message"
    # Stored: it continues as any stored response does.
    follow = openai_client.responses.create(
        previous_response_id=r.id, input="more", max_output_tokens=3
    )
    assert follow.status in ("completed", "incomplete")


def test_background_needs_store(openai_client):
    with pytest.raises(openai.BadRequestError) as info:
        start(openai_client, store=False)
    assert info.value.param == "store"


def test_resume_from_any_sequence_number(openai_client):
    r = start(openai_client)
    poll(openai_client, r.id)
    full = dumps(openai_client.responses.retrieve(r.id, stream=True))
    assert [e["sequence_number"] for e in full] == list(range(len(full)))
    assert full[0]["type"] == "response.created" and full[-1]["type"] == "response.incomplete"
    assert full[-1]["response"]["id"] == r.id and full[-1]["response"]["background"] is True
    for n in (0, 5, len(full) - 2):
        tail = dumps(openai_client.responses.retrieve(r.id, stream=True, starting_after=n))
        assert tail == full[n + 1 :]
    # The same request streamed live gives the same events, in the same order.
    live = openai_client.responses.create(
        model=CHATML, input="tell me", stream=True, max_output_tokens=24, extra_body=RUN_TO_CAP
    )
    assert [e.type for e in live] == [e["type"] for e in full]


def test_resume_with_a_bad_sequence_number_is_a_400(openai_client, standalone):
    r = start(openai_client, tokens=2)
    poll(openai_client, r.id)
    url = f"{standalone.base_url}/responses/{r.id}"
    raw = httpx.get(url, params={"stream": "true", "starting_after": "3"}, timeout=60)
    lines = [ln for ln in raw.text.splitlines() if ln]
    assert lines[-1] == "data: [DONE]" and sum("[DONE]" in ln for ln in lines) == 1
    answer = httpx.get(url, params={"stream": "true", "starting_after": "x"})
    assert answer.status_code == 400 and answer.json()["error"]["param"] == "starting_after"


def test_resume_after_a_restart(sf_start_standalone, tmp_path: Path):
    store = tmp_path / "kept"
    server = sf_start_standalone(sessions_dir=store)
    client = client_for(server)
    r = start(client)
    done = poll(client, r.id)
    full = dumps(client.responses.retrieve(r.id, stream=True))
    server.stop()
    again = client_for(sf_start_standalone(sessions_dir=store))
    assert dumps(again.responses.retrieve(r.id, stream=True, starting_after=3)) == full[4:]
    back = again.responses.retrieve(r.id)
    assert back.status == done.status and back.background is True and back.usage == done.usage


def test_cancel_mid_generation_stops_the_engine(sf_start_standalone, sf_model_cache):
    server = sf_start_standalone("--threads=1", models=(f"slow={slow_model(sf_model_cache)}",))
    client = client_for(server)
    r = start(client, tokens=1800, model="slow")
    url = f"{server.base_url}/responses/{r.id}"
    with httpx.stream("GET", url, params={"stream": "true"}, timeout=60) as s:
        next(line for line in s.iter_lines() if "response.output_text.delta" in line)
    # Following its events and leaving does not stop it: it has no connection.
    live = client.responses.retrieve(r.id)
    assert live.status == "in_progress"
    cancelled = client.responses.cancel(r.id)
    assert cancelled.status == "cancelled" and cancelled.background is True
    assert client.responses.retrieve(r.id).status == "cancelled"
    assert settled_tokens(server.url, "slow") - 8 < 1800  # it stopped before its end
    events = dumps(client.responses.retrieve(r.id, stream=True))
    assert events[-1]["type"] == "response.cancelled"
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    # Cancelling again returns it unchanged.
    assert client.responses.cancel(r.id).status == "cancelled"


def test_cancel_answers(openai_client):
    done = poll(openai_client, start(openai_client, tokens=2).id)
    assert openai_client.responses.cancel(done.id).status == done.status  # finished: unchanged
    plain = openai_client.responses.create(model=CHATML, input="x", max_output_tokens=2)
    with pytest.raises(openai.BadRequestError):
        openai_client.responses.cancel(plain.id)  # not a background response
    with pytest.raises(openai.NotFoundError):
        openai_client.responses.cancel("resp_" + "0" * 32)


def test_a_background_response_is_owned_by_its_key(sf_start_standalone, tmp_path: Path):
    policy = tmp_path / "keys.json"
    keys = [{"name": "alice", "key": "sk-alice"}, {"name": "bob", "key": "sk-bob"}]
    policy.write_text(json.dumps({"keys": keys}))
    server = sf_start_standalone(f"--key-policy={policy}")
    alice, bob = client_for(server, "sk-alice"), client_for(server, "sk-bob")
    r = start(alice, tokens=4)
    with pytest.raises(openai.NotFoundError):
        bob.responses.retrieve(r.id)
    with pytest.raises(openai.NotFoundError):
        bob.responses.cancel(r.id)
    with pytest.raises(openai.NotFoundError):
        list(bob.responses.retrieve(r.id, stream=True))
    assert poll(alice, r.id).status == "incomplete"
    with pytest.raises(openai.NotFoundError):
        bob.responses.retrieve(r.id)

"""Durable sessions over HTTP: warm forks, rebuilds, deletion, keys, restart, disconnects."""

from __future__ import annotations

import json
import signal
import threading
import time
from pathlib import Path

import httpx
import openai
import pytest
from support.engine_processes import settled_tokens
from support.no_eos import RUN_TO_CAP
from support.slow_model import slow_model

from jupyter_superfluid.store import Store

CHATML = "superfluid/tiny-chatml"
QWEN = "superfluid/tiny-qwen3"
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "parameters": {"type": "object", "properties": {"city": {"enum": ["Oslo"]}}},
}


def client_for(server, key="unused"):
    return openai.OpenAI(base_url=server.base_url, api_key=key, max_retries=0, timeout=120)


def reader(server) -> Store:
    return Store(server.sessions_dir, readonly=True)


def completed(client, **kwargs):
    """Create a response that ended normally (tiny models end on their own)."""
    for seed in range(40):
        r = client.responses.create(max_output_tokens=120, extra_body={"seed": seed}, **kwargs)
        if r.status == "completed":
            return r
    raise AssertionError("no seed gave a completed response")


def stored_tokens(store: Store, response_id: str) -> list[int]:
    rec = store.get_response(response_id)
    assert rec is not None
    return store.session_tokens(rec.session_id, rec.end)


def session_of(store: Store, response_id: str):
    rec = store.get_response(response_id)
    assert rec is not None
    return store.get_session(rec.session_id)


def test_three_turn_chain_is_forked_warm(standalone):
    client, store = client_for(standalone), reader(standalone)
    a = completed(client, model=CHATML, input="My name is Ada.", instructions="Be terse.")
    b = completed(client, previous_response_id=a.id, input="Name?", instructions="Be terse.")
    c = completed(client, previous_response_id=b.id, input="Again?", instructions="Be terse.")
    for parent, child in ((a, b), (b, c)):
        stored = stored_tokens(store, parent.id)
        assert child.usage.input_tokens_details.cached_tokens == len(stored)
        info = session_of(store, child.id)
        parent_rec = store.get_response(parent.id)
        assert (info.parent_id, info.parent_len) == (parent_rec.session_id, parent_rec.end)
        assert info.meta["forked"] is True
        # The child's prompt is the stored tokens, exactly, plus the new input's.
        assert stored_tokens(store, child.id)[: len(stored)] == stored


def test_warm_header_reports_cached_tokens(standalone):
    client = client_for(standalone)
    a = completed(client, model=CHATML, input="header")
    body = {"previous_response_id": a.id, "input": "next", "max_output_tokens": 5}
    r = httpx.post(standalone.base_url + "/responses", json=body, timeout=60)
    cached = r.json()["usage"]["input_tokens_details"]["cached_tokens"]
    assert cached > 0 and int(r.headers["x-superfluid-warm"]) == cached


def test_branching_twice_gives_two_independent_warm_children(standalone):
    client, store = client_for(standalone), reader(standalone)
    a = completed(client, model=CHATML, input="root")
    stored = stored_tokens(store, a.id)
    x = completed(client, previous_response_id=a.id, input="left")
    y = completed(client, previous_response_id=a.id, input="right")
    for child in (x, y):  # (>=: a retried seed also finds its own earlier input cached)
        assert child.usage.input_tokens_details.cached_tokens >= len(stored)
    sx, sy = session_of(store, x.id), session_of(store, y.id)
    assert sx.id != sy.id and sx.parent_id == sy.parent_id
    assert stored_tokens(store, x.id) != stored_tokens(store, y.id)


def test_interleaved_conversations_stay_warm(standalone):
    client, store = client_for(standalone), reader(standalone)
    heads = [completed(client, model=CHATML, input=f"conversation {n}") for n in "ABC"]
    for head in heads[1:]:
        completed(client, previous_response_id=head.id, input="more")
    again = completed(client, previous_response_id=heads[0].id, input="back to A")
    assert again.usage.input_tokens_details.cached_tokens >= len(stored_tokens(store, heads[0].id))


REBUILDS = {
    "instructions": ({"model": CHATML, "instructions": "one"}, {"instructions": "two"}),
    "tools": ({"model": CHATML, "tools": [WEATHER]}, {"tools": []}),
    "thinking": ({"model": QWEN}, {"reasoning": {"effort": "none"}}),
    "model": ({"model": CHATML}, {"model": QWEN}),
    "per-message": ({"model": QWEN}, {}),
}


@pytest.mark.parametrize("case", sorted(REBUILDS))
def test_rebuild_conditions(standalone, case):
    client, store = client_for(standalone), reader(standalone)
    first_kw, next_kw = REBUILDS[case]
    a = completed(client, input="start", **first_kw)
    b = client.responses.create(
        previous_response_id=a.id,
        input="go on",
        max_output_tokens=8,
        extra_body=RUN_TO_CAP,
        **next_kw,
    )
    assert b.status == "incomplete" and b.usage.output_tokens == 8
    info = session_of(store, b.id)
    assert info.parent_id is None and info.meta["forked"] is False
    # Rebuilt means: the same prompt as sending the whole conversation afresh.
    items = [
        {"role": "user", "content": "start"},
        *[o.model_dump(exclude_none=True) for o in a.output],
        {"role": "user", "content": "go on"},
    ]
    model = next_kw.get("model", first_kw["model"])
    fresh_kw = {k: v for k, v in {**first_kw, **next_kw}.items() if k != "model"}
    if "instructions" in first_kw and "instructions" not in next_kw:
        fresh_kw.pop("instructions")
    fresh = client.responses.create(model=model, input=items, max_output_tokens=1, **fresh_kw)
    assert fresh.usage.input_tokens == b.usage.input_tokens


def test_turn_cut_by_max_output_tokens_rebuilds(standalone):
    client, store = client_for(standalone), reader(standalone)
    a = client.responses.create(
        model=CHATML, input="cut", max_output_tokens=2, extra_body={"seed": 7}
    )
    assert a.status == "incomplete"
    b = client.responses.create(previous_response_id=a.id, input="go", max_output_tokens=3)
    assert session_of(store, b.id).meta["forked"] is False


def test_delete_reroots_forks_and_hides_continued_parent(standalone):
    client, store = client_for(standalone), reader(standalone)
    a = completed(client, model=CHATML, input="a")
    b = completed(client, previous_response_id=a.id, input="b")
    c = completed(client, previous_response_id=b.id, input="c")
    before = stored_tokens(store, c.id)
    client.responses.delete(b.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(b.id)
    with pytest.raises(openai.BadRequestError):
        client.responses.create(previous_response_id=b.id, input="x")
    assert stored_tokens(store, c.id) == before  # rerooted: same tokens, own copy
    chain = [r.id for r in store.response_chain(c.id)]
    assert chain == [a.id, b.id, c.id]  # b is hidden, not gone: c's history needs it
    d = completed(client, previous_response_id=c.id, input="d")
    assert d.usage.input_tokens_details.cached_tokens >= len(before)
    client.responses.delete(d.id)
    client.responses.delete(c.id)
    assert store.response_chain(a.id)[-1].id == a.id
    raw = store.get_response(b.id)
    assert raw is None
    assert b.id not in [r.id for r in store.children(a.id, include_deleted=True)]


def test_listing_is_newest_first_and_paginated(sf_start_standalone):
    server = sf_start_standalone()
    client = client_for(server)
    made = [
        client.responses.create(model=CHATML, input=f"n{i}", max_output_tokens=2).id
        for i in range(5)
    ]
    page = httpx.get(server.base_url + "/responses", params={"limit": 2}).json()
    assert [d["id"] for d in page["data"]] == made[::-1][:2] and page["has_more"]
    assert set(page["data"][0]) >= {
        "id",
        "created_at",
        "model",
        "previous_response_id",
        "status",
        "preview",
        "cached_tokens",
    }
    rest = httpx.get(
        server.base_url + "/responses", params={"limit": 10, "after": page["last_id"]}
    ).json()
    assert [d["id"] for d in rest["data"]] == made[::-1][2:] and not rest["has_more"]


def test_key_policy_isolates_principals(sf_start_standalone, tmp_path: Path):
    policy = tmp_path / "keys.json"
    policy.write_text(
        json.dumps(
            {"keys": [{"name": "alice", "key": "sk-alice"}, {"name": "bob", "key": "sk-bob"}]}
        )
    )
    server = sf_start_standalone(f"--key-policy={policy}")
    alice, bob = client_for(server, "sk-alice"), client_for(server, "sk-bob")
    mine = alice.responses.create(model=CHATML, input="secret", max_output_tokens=3)
    assert alice.responses.retrieve(mine.id).id == mine.id
    with pytest.raises(openai.NotFoundError):
        bob.responses.retrieve(mine.id)
    with pytest.raises(openai.NotFoundError):
        bob.responses.input_items.list(mine.id)
    with pytest.raises(openai.NotFoundError):
        bob.responses.delete(mine.id)
    with pytest.raises(openai.BadRequestError) as info:
        bob.responses.create(previous_response_id=mine.id, input="steal")
    assert info.value.code == "previous_response_not_found"
    listed = httpx.get(
        server.base_url + "/responses", headers={"Authorization": "Bearer sk-bob"}
    ).json()
    assert mine.id not in [d["id"] for d in listed["data"]]
    with pytest.raises(openai.AuthenticationError):
        client_for(server, "sk-mallory").models.list()
    r = httpx.get(server.base_url + "/models")
    assert r.status_code == 401


def generated_count(server) -> int:
    body = httpx.get(f"{server.base_url}/models/{CHATML}", timeout=10).json()
    return body["superfluid"]["tokens_generated"]


def test_disconnect_cancels_generation_and_stores_nothing(sf_start_standalone, sf_model_cache):
    # The slow model takes ~9 s for 1800 tokens: the disconnect comes long before the end.
    slow = f"slow={slow_model(sf_model_cache)}"
    server = sf_start_standalone("--threads=1", models=(slow,))
    body = {
        "model": "slow",
        "input": "go",
        "stream": True,
        "max_output_tokens": 1800,
        **RUN_TO_CAP,
    }
    response_id = None
    with httpx.stream("POST", server.base_url + "/responses", json=body, timeout=60) as r:
        for line in r.iter_lines():
            if line.startswith("data: {"):  # not the closing [DONE]
                event = json.loads(line[6:])
                response_id = response_id or event.get("response", {}).get("id")
                if event["type"] == "response.output_text.delta":
                    break
    assert settled_tokens(server.url, "slow") - 8 < 1800  # it stopped before its end
    assert httpx.get(f"{server.base_url}/responses/{response_id}").status_code == 404


def test_kill_9_loses_nothing_acknowledged_and_shows_nothing_partial(
    sf_start_standalone, tmp_path: Path
):
    store_dir = tmp_path / "durable"
    server = sf_start_standalone(sessions_dir=store_dir)
    client = client_for(server)
    acknowledged = [completed(client, model=CHATML, input="keep me")]
    acknowledged.append(completed(client, previous_response_id=acknowledged[0].id, input="and me"))
    # A long streamed generation is in flight when the server dies.
    cut_id: list[str] = []

    def stream_forever():
        body = {
            "model": CHATML,
            "input": "never ends",
            "stream": True,
            "max_output_tokens": 1800,
            **RUN_TO_CAP,
        }
        try:
            with httpx.stream("POST", server.base_url + "/responses", json=body, timeout=60) as r:
                for line in r.iter_lines():
                    if line.startswith("data: {") and not cut_id:
                        cut_id.append(json.loads(line[6:])["response"]["id"])
        except httpx.HTTPError:
            pass

    thread = threading.Thread(target=stream_forever)
    thread.start()
    while not cut_id:
        time.sleep(0.01)
    server.stop(signal.SIGKILL)
    thread.join()
    again = sf_start_standalone(sessions_dir=store_dir)
    client = client_for(again)
    for r in acknowledged:
        back = client.responses.retrieve(r.id)
        assert back.output_text == r.output_text and back.usage == r.usage
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(cut_id[0])
    follow = client.responses.create(
        previous_response_id=acknowledged[-1].id, input="after", max_output_tokens=4
    )
    assert follow.previous_response_id == acknowledged[-1].id

"""The Conversations API through the official openai SDK: objects, items, and responses in them."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import openai
import pytest

from jupyter_superfluid.store import Store

CHATML = "superfluid/tiny-chatml"


def client_for(server, key="unused"):
    return openai.OpenAI(base_url=server.base_url, api_key=key, max_retries=0, timeout=120)


def completed(client, **kwargs):
    """A response that ended normally (so the next one continues it warm), found by seed.

    In a conversation a cut turn moves the head too, so each retry starts again where
    the first try did: a branch from that head (or from the root). Seeds fix which
    try completes, so a run's tree is the same every time.
    """
    extra = kwargs.pop("extra_body", {})
    conv = kwargs.get("conversation")
    start = kwargs.get("previous_response_id")
    if conv is not None and start is None and not extra.get("branch_from_root"):
        start = client.conversations.retrieve(conv).model_extra["head_response_id"]
    for seed in range(40):
        body = {"seed": seed, **extra}
        r = client.responses.create(max_output_tokens=120, extra_body=body, **kwargs)
        if r.status == "completed":
            return r
        if conv is not None:
            kwargs["previous_response_id"] = start
            extra = {**extra, "branch_from_root": start is None}
    raise AssertionError("no seed gave a completed response")


def stored_tokens(server, response_id: str) -> list[int]:
    store = Store(server.sessions_dir, readonly=True)
    rec = store.get_response(response_id)
    assert rec is not None
    return store.session_tokens(rec.session_id, rec.end)


def test_create_retrieve_update_delete(openai_client):
    conv = openai_client.conversations.create(metadata={"title": "first"})
    assert conv.id.startswith("conv_") and conv.object == "conversation"
    assert conv.metadata == {"title": "first"}
    again = openai_client.conversations.retrieve(conv.id)
    assert (again.id, again.created_at, again.metadata) == (conv.id, conv.created_at, conv.metadata)
    updated = openai_client.conversations.update(conv.id, metadata={"title": "renamed"})
    assert updated.metadata == {"title": "renamed"}
    assert openai_client.conversations.retrieve(conv.id).metadata == {"title": "renamed"}
    gone = openai_client.conversations.delete(conv.id)
    assert (gone.id, gone.object, gone.deleted) == (conv.id, "conversation.deleted", True)
    with pytest.raises(openai.NotFoundError) as info:
        openai_client.conversations.retrieve(conv.id)
    assert info.value.code == "conversation_not_found"


def test_items_are_added_listed_paged_retrieved_and_deleted(openai_client):
    conv = openai_client.conversations.create(
        items=[{"type": "message", "role": "user", "content": "one"}]
    )
    added = openai_client.conversations.items.create(
        conv.id,
        items=[
            {"type": "message", "role": "assistant", "content": "two"},
            {"type": "message", "role": "user", "content": "three"},
        ],
    )
    assert [i.role for i in added.data] == ["assistant", "user"]
    newest_first = openai_client.conversations.items.list(conv.id)
    texts = [i.content[0].text for i in newest_first.data]
    assert texts == ["three", "two", "one"]
    oldest_first = openai_client.conversations.items.list(conv.id, order="asc", limit=2)
    assert [i.content[0].text for i in oldest_first.data] == ["one", "two"]
    assert oldest_first.has_more is True
    rest = openai_client.conversations.items.list(
        conv.id, order="asc", after=oldest_first.data[-1].id
    )
    assert [i.content[0].text for i in rest.data] == ["three"] and rest.has_more is False
    one = openai_client.conversations.items.retrieve(added.data[0].id, conversation_id=conv.id)
    assert one.id == added.data[0].id and one.content[0].text == "two"
    after_delete = openai_client.conversations.items.delete(
        added.data[0].id, conversation_id=conv.id
    )
    assert after_delete.id == conv.id
    left = openai_client.conversations.items.list(conv.id, order="asc")
    assert [i.content[0].text for i in left.data] == ["one", "three"]
    with pytest.raises(openai.NotFoundError) as info:
        openai_client.conversations.items.retrieve(added.data[0].id, conversation_id=conv.id)
    assert info.value.code == "item_not_found"


def test_responses_in_a_conversation_move_its_head_warm(standalone):
    client = client_for(standalone)
    conv = client.conversations.create()
    # An input no other test on the shared server sends: its prefix is this conversation's.
    first = completed(client, model=CHATML, input="Ada, in a conversation.", conversation=conv.id)
    conv_id = first.conversation.id
    assert first.previous_response_id is None
    second = completed(client, input="Name?", conversation=conv_id)
    assert second.conversation.id == conv_id
    # Continued from the head: the server's own chain, warm over every stored token.
    assert second.previous_response_id == first.id
    cached = second.usage.input_tokens_details.cached_tokens
    assert cached == len(stored_tokens(standalone, first.id))
    items = client.conversations.items.list(conv_id, order="asc").data
    kinds = [(i.type, getattr(i, "role", None)) for i in items]
    assert kinds == [("message", "user"), ("message", "assistant")] * 2
    assert items[0].content[0].text == "Ada, in a conversation."
    assert items[1].id == first.output[0].id and items[3].id == second.output[0].id
    owners = [i.model_extra["response_id"] for i in items]
    assert owners == [first.id, first.id, second.id, second.id]
    assert client.conversations.retrieve(conv_id).model_extra["head_response_id"] == second.id


def test_pending_items_are_the_next_response_input(standalone):
    client = client_for(standalone)
    conv = client.conversations.create()
    first = completed(client, model=CHATML, input="Hello.", conversation=conv.id)
    conv_id = first.conversation.id
    client.conversations.items.create(
        conv_id, items=[{"type": "message", "role": "user", "content": "Added first."}]
    )
    second = completed(client, input="Then this.", conversation=conv_id)
    assert second.previous_response_id == first.id
    inputs = client.responses.input_items.list(second.id, order="asc").data
    assert [i.content[0].text for i in inputs] == ["Added first.", "Then this."]
    texts = [
        i.content[0].text
        for i in client.conversations.items.list(conv_id, order="asc").data
        if i.role == "user"
    ]
    assert texts == ["Hello.", "Added first.", "Then this."]


def test_deleting_an_item_of_the_chain_sends_the_rest_whole(standalone):
    client = client_for(standalone)
    conv = client.conversations.create()
    first = completed(client, model=CHATML, input="Forget me.", conversation=conv.id)
    conv_id = first.conversation.id
    client.conversations.items.delete(first.output[0].id, conversation_id=conv_id)
    second = completed(client, input="Next.", conversation=conv_id)
    assert second.previous_response_id is None  # the head no longer matches the items
    inputs = client.responses.input_items.list(second.id, order="asc").data
    assert [(i.role, i.content[0].text) for i in inputs] == [
        ("user", "Forget me."),
        ("user", "Next."),
    ]
    third = completed(client, input="And on.", conversation=conv_id)
    assert third.previous_response_id == second.id  # a valid head again


def test_a_deleted_head_makes_the_next_turn_send_every_item(standalone):
    client = client_for(standalone)
    conv = client.conversations.create()
    first = completed(client, model=CHATML, input="Head to delete.", conversation=conv.id)
    conv_id = first.conversation.id
    items = client.conversations.items.list(conv_id, order="asc").data
    client.responses.delete(first.id)
    second = completed(client, model=CHATML, input="After it.", conversation=conv_id)
    assert second.previous_response_id is None  # nothing stored to continue from
    inputs = client.responses.input_items.list(second.id, order="asc").data
    assert [i.id for i in inputs[: len(items)]] == [i.id for i in items]
    assert [i.content[0].text for i in inputs[len(items) :]] == ["After it."]


def test_deleting_a_conversation_purges_its_responses(standalone):
    client = client_for(standalone)
    conv = client.conversations.create()
    first = completed(client, model=CHATML, input="purge me", conversation=conv.id)
    client.conversations.delete(first.conversation.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(first.id)
    with pytest.raises(openai.NotFoundError):
        client.conversations.items.list(first.conversation.id)


@pytest.mark.parametrize(
    ("extra", "status", "param", "code"),
    [
        ({"conversation": "conv_nope"}, 404, "conversation", "conversation_not_found"),
        ({"conversation": {"id": 5}}, 400, "conversation.id", None),
        ({"previous_response_id": "resp_x"}, 400, "previous_response_id", None),
        ({"conversation": None, "branch_from_root": True}, 400, "conversation", None),
        ({"store": False}, 400, "store", None),
    ],
)
def test_bad_conversation_on_a_response(standalone, extra, status, param, code):
    conv = client_for(standalone).conversations.create()
    body = {"model": CHATML, "input": "hi", "conversation": conv.id, **extra}
    r = httpx.post(standalone.base_url + "/responses", json=body, timeout=60)
    assert r.status_code == status, r.text
    error = r.json()["error"]
    assert error["param"] == param
    if code is not None:
        assert error["code"] == code


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "param"),
    [
        ("POST", "/conversations", {"items": "no"}, 400, "items"),
        ("POST", "/conversations", {"metadata": {"k": 5}}, 400, "metadata.k"),
        ("POST", "/conversations/{id}", {}, 400, "metadata"),
        ("POST", "/conversations/{id}/items", {"items": []}, 400, "items"),
        ("POST", "/conversations/{id}/items", {"items": [{"type": "nope"}]}, 400, "items[0].type"),
        ("GET", "/conversations/conv_nope", None, 404, "conversation_id"),
        ("GET", "/conversations/{id}/items/msg_nope", None, 404, "item_id"),
        ("GET", "/conversations?limit=0", None, 400, "limit"),
        ("GET", "/conversations?after=conv_nope", None, 400, "after"),
    ],
)
def test_bad_requests_name_the_field(standalone, method, path, body, status, param):
    conv = client_for(standalone).conversations.create()
    url = standalone.base_url + path.format(id=conv.id)
    r = httpx.request(method, url, json=body, timeout=60)
    assert r.status_code == status, r.text
    assert r.json()["error"]["param"] == param


def test_listing_newest_first_titled_and_searchable(sf_start_standalone):
    server = sf_start_standalone()
    client = client_for(server)
    a = client.conversations.create(
        items=[{"type": "message", "role": "user", "content": "About   penguins\nand ice"}]
    )
    b = client.conversations.create(metadata={"title": "Named chat"})
    c = client.conversations.create()
    client.conversations.items.create(
        a.id, items=[{"type": "message", "role": "user", "content": "more"}]
    )  # a is the most recently active now
    listing = httpx.get(server.base_url + "/conversations").json()
    assert [d["id"] for d in listing["data"]] == [a.id, c.id, b.id]
    titles = {d["id"]: d["title"] for d in listing["data"]}
    assert titles == {a.id: "About penguins and ice", b.id: "Named chat", c.id: ""}
    page = httpx.get(server.base_url + "/conversations", params={"limit": 1}).json()
    assert [d["id"] for d in page["data"]] == [a.id] and page["has_more"] is True
    rest = httpx.get(server.base_url + "/conversations", params={"after": a.id, "limit": 5}).json()
    assert [d["id"] for d in rest["data"]] == [c.id, b.id] and rest["has_more"] is False
    found = httpx.get(server.base_url + "/conversations", params={"q": "PENGUIN"}).json()
    assert [d["id"] for d in found["data"]] == [a.id]
    assert httpx.get(server.base_url + "/conversations", params={"q": "100%"}).json()["data"] == []


def test_conversations_outlive_a_restart(sf_start_standalone, tmp_path: Path):
    sessions = tmp_path / "sessions"
    server = sf_start_standalone(sessions_dir=sessions)
    client = client_for(server)
    conv = client.conversations.create(metadata={"title": "kept"})
    first = completed(client, model=CHATML, input="remember", conversation=conv.id)
    server.stop()
    again = sf_start_standalone(sessions_dir=sessions)
    client = client_for(again)
    assert client.conversations.retrieve(first.conversation.id).metadata == {"title": "kept"}
    second = completed(client, input="still here?", conversation=first.conversation.id)
    assert second.previous_response_id == first.id
    assert second.usage.input_tokens_details.cached_tokens > 0


def test_a_conversation_is_owned_by_its_key(sf_start_standalone, tmp_path: Path):
    policy = tmp_path / "keys.json"
    keys = [{"name": "alice", "key": "sk-alice"}, {"name": "bob", "key": "sk-bob"}]
    policy.write_text(json.dumps({"keys": keys}))
    server = sf_start_standalone(f"--key-policy={policy}")
    alice, bob = client_for(server, "sk-alice"), client_for(server, "sk-bob")
    conv = alice.conversations.create(metadata={"title": "mine"})
    for call in (
        lambda: bob.conversations.retrieve(conv.id),
        lambda: bob.conversations.update(conv.id, metadata={}),
        lambda: bob.conversations.delete(conv.id),
        lambda: bob.conversations.items.list(conv.id),
        lambda: bob.responses.create(model=CHATML, input="x", conversation=conv.id),
    ):
        with pytest.raises(openai.NotFoundError):
            call()
    listed = httpx.get(
        server.base_url + "/conversations", headers={"Authorization": "Bearer sk-bob"}
    ).json()
    assert listed["data"] == []
    assert alice.conversations.retrieve(conv.id).metadata == {"title": "mine"}


def test_a_branch_from_an_earlier_response_moves_the_conversation(standalone):
    client = client_for(standalone)
    conv = client.conversations.create()
    a = completed(client, model=CHATML, input="one", conversation=conv.id)
    conv_id = a.conversation.id
    b = completed(client, input="two", conversation=conv_id)
    # Edit "two": a fork from a, warm over a's stored tokens.
    b2 = completed(client, input="two, edited", conversation=conv_id, previous_response_id=a.id)
    assert b2.previous_response_id == a.id
    # Warm over all of a's stored tokens (and the start of b's prompt it shares).
    assert b2.usage.input_tokens_details.cached_tokens >= len(stored_tokens(standalone, a.id))
    users = [
        i.content[0].text
        for i in client.conversations.items.list(conv_id, order="asc").data
        if i.role == "user"
    ]
    assert users == ["one", "two, edited"]
    tree = httpx.get(f"{standalone.base_url}/conversations/{conv_id}/responses").json()
    assert [(r["id"], r["previous_response_id"]) for r in tree["data"]] == [
        (a.id, None),
        (b.id, a.id),
        (b2.id, a.id),
    ]
    assert tree["data"][2]["cached_tokens"] == b2.usage.input_tokens_details.cached_tokens
    # Back to the first branch: its items again, and the next turn continues b.
    back = httpx.post(
        f"{standalone.base_url}/conversations/{conv_id}", json={"head_response_id": b.id}
    ).json()
    assert back["head_response_id"] == b.id
    users = [
        i.content[0].text
        for i in client.conversations.items.list(conv_id, order="asc").data
        if i.role == "user"
    ]
    assert users == ["one", "two"]
    c = completed(client, input="three", conversation=conv_id)
    assert c.previous_response_id == b.id


def test_a_branch_from_the_root_and_branches_that_are_not_its_own(standalone):
    client = client_for(standalone)
    conv = client.conversations.create()
    a = completed(client, model=CHATML, input="first", conversation=conv.id)
    conv_id = a.conversation.id
    root = completed(
        client, input="first, edited", conversation=conv_id, extra_body={"branch_from_root": True}
    )
    assert root.previous_response_id is None
    items = client.conversations.items.list(conv_id, order="asc").data
    assert [i.content[0].text for i in items if i.role == "user"] == ["first, edited"]
    other = client.responses.create(model=CHATML, input="elsewhere", max_output_tokens=2)
    for body, param in (
        ({"head_response_id": other.id}, "head_response_id"),
        ({"head_response_id": "resp_nope"}, "head_response_id"),
    ):
        r = httpx.post(f"{standalone.base_url}/conversations/{conv_id}", json=body)
        assert r.status_code == 400 and r.json()["error"]["param"] == param
    r = httpx.post(
        standalone.base_url + "/responses",
        json={"input": "x", "conversation": conv_id, "previous_response_id": other.id},
    )
    assert r.status_code == 400 and r.json()["error"]["param"] == "previous_response_id"
    # Deleting it purges every branch's responses.
    client.conversations.delete(conv_id)
    for rid in (a.id, root.id):
        with pytest.raises(openai.NotFoundError):
            client.responses.retrieve(rid)
    assert client.responses.retrieve(other.id).id == other.id

"""ConversationTree in a real kernel against a real server: nodes, intents, Python API."""

from __future__ import annotations

import httpx
import openai
import pytest

from tests.notebook.widgets.conftest import KernelFront

CHATML = "superfluid/tiny-chatml"


@pytest.fixture(scope="module")
def convo(standalone):
    """a ─ b ─ d, a ─ c; and an unrelated conversation x."""
    client = openai.OpenAI(base_url=standalone.base_url, api_key="k", max_retries=0)

    def make(text, previous=None):
        kwargs = {"previous_response_id": previous} if previous else {"model": CHATML}
        return client.responses.create(input=text, max_output_tokens=12, **kwargs)

    a = make("root question")
    b, c = make("left", a.id), make("right", a.id)
    d = make("deeper", b.id)
    x = make("another conversation")
    return {"a": a, "b": b, "c": c, "d": d, "x": x, "client": client}


def nodes_of(front: KernelFront, comm: str) -> dict[str, str | None]:
    return {n["id"]: n["previous_response_id"] for n in front.models[comm]["nodes"]}


def test_tree_shows_the_conversation_and_selects_a_node(front, convo):
    a, b, c, d = (convo[k] for k in "abcd")
    front.run(
        "from jupyter_superfluid.notebook.widgets import ConversationTree\n"
        f"tree = ConversationTree({d.id!r})"
    )
    comm = front.comm_of("tree")
    state = front.models[comm]
    assert (state["_model_name"], state["_view_name"]) == (
        "ConversationTreeModel",
        "ConversationTreeView",
    )
    assert nodes_of(front, comm) == {a.id: None, b.id: a.id, c.id: a.id, d.id: b.id}
    assert state["current"] == d.id and state["selected"] == "" and state["live"] is None
    node = next(n for n in state["nodes"] if n["id"] == d.id)
    assert node["cached_tokens"] == d.usage.input_tokens_details.cached_tokens
    assert set(node) == {"id", "created_at", "model", "status", "previous_response_id"} | {
        "cached_tokens",
        "preview",
    }
    front.send_custom(comm, {"type": "select", "id": b.id})
    front.wait(lambda: front.models[comm]["selected"] == b.id, 30)
    detail = front.models[comm]["detail"]
    assert detail["id"] == b.id and detail["model"] == CHATML
    assert detail["input"] == [{"type": "message", "role": "user", "text": "left"}]
    assert "".join(i["text"] for i in detail["output"]) == b.output_text
    assert detail["usage"]["output_tokens"] == b.usage.output_tokens


def test_branch_by_message_streams_a_sibling_live(front, convo):
    a, b, c = convo["a"], convo["b"], convo["c"]
    comm = front.comm_of("tree")
    front.run("tree.branch_options = {'max_output_tokens': 300, 'extra_body': {'seed': 3}}")
    front.send_custom(comm, {"type": "branch", "id": a.id, "text": "a third way"})
    front.wait(lambda: front.models[comm]["busy"] is True, 30)
    front.wait(lambda: front.models[comm]["busy"] is False, 60)
    state = front.models[comm]
    assert state["error"] == ""
    live = front.models[state["live"].removeprefix("IPY_MODEL_")]
    new = live["response_id"]
    assert live["status"] in ("completed", "incomplete") and live["usage"]["output_tokens"] > 0
    siblings = [i for i, p in nodes_of(front, comm).items() if p == a.id]
    assert set(siblings) == {b.id, c.id, new}
    assert state["current"] == state["selected"] == new
    assert state["detail"]["input"][0]["text"] == "a third way"
    assert front.value("tree.live.stop_mode") == "none"


def test_python_api_branch_select_and_refresh(front, convo, standalone):
    d = convo["d"]
    comm = front.comm_of("tree")
    front.run(f"reply = tree.branch({d.id!r}, 'from python', max_output_tokens=8)")
    new = front.value("reply.id")
    assert nodes_of(front, comm)[new] == d.id and front.models[comm]["current"] == new
    elsewhere = convo["client"].responses.create(
        previous_response_id=new, input="made elsewhere", max_output_tokens=4
    )
    assert elsewhere.id not in nodes_of(front, comm)
    front.send_custom(comm, {"type": "refresh"})
    front.wait(lambda: elsewhere.id in nodes_of(front, comm), 30)
    assert convo["x"].id not in nodes_of(front, comm)
    front.run(f"picked = tree.select({d.id!r})")
    assert front.value("picked['id']") == front.models[comm]["selected"] == d.id


def test_delete_by_message_redraws_with_hidden_parents(front, convo, standalone):
    b, c, d = convo["b"], convo["c"], convo["d"]
    comm = front.comm_of("tree")
    front.send_custom(comm, {"type": "delete", "id": c.id})
    front.wait(lambda: c.id not in nodes_of(front, comm), 30)
    assert httpx.get(f"{standalone.base_url}/responses/{c.id}").status_code == 404
    front.send_custom(comm, {"type": "delete", "id": b.id})  # d continues b: b stays, hidden
    front.wait(lambda: b.id not in nodes_of(front, comm), 30)
    assert nodes_of(front, comm)[d.id] == b.id  # the front-end draws b as a placeholder
    assert front.models[comm]["error"] == ""


def test_intent_errors_are_shown_not_raised(front):
    comm = front.comm_of("tree")
    front.send_custom(comm, {"type": "select", "id": "resp_unknown"})
    front.wait(lambda: "404" in front.models[comm]["error"], 30)
    front.send_custom(comm, {"type": "branch", "id": "resp_unknown", "text": " "})
    front.wait(lambda: "write a message" in front.models[comm]["error"], 30)
    front.run("assert tree.busy is False")

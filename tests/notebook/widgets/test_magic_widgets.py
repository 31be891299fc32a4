"""``%%respond`` picks the ResponseView in JupyterLab-like front-ends; ``%respond tree``."""

from __future__ import annotations

from tests.notebook.widgets.conftest import KernelFront

VIEW_MIME = "application/vnd.jupyter.widget-view+json"


def opened(front: KernelFront, outputs: list[dict], model_name: str) -> list[str]:
    """Comm ids of the widgets of one kind that a cell opened."""
    return [
        m["content"]["comm_id"]
        for m in outputs
        if m["msg_type"] == "comm_open"
        and m["content"]["data"]["state"].get("_model_name") == model_name
    ]


def test_respond_streams_into_a_response_view_in_jupyterlab(front):
    front.run("%load_ext jupyter_superfluid")
    out = front.run("%%respond --new --max-tokens 40 --seed 2\nHello there", cell_id="c1")
    [comm] = opened(front, out, "ResponseViewModel")
    shown = [m for m in out if m["msg_type"] == "display_data"]
    assert shown and shown[0]["content"]["data"][VIEW_MIME]["model_id"] == comm
    assert not [m for m in out if m["msg_type"] == "execute_result"]  # the widget shows it
    state = front.models[comm]
    assert state["status"] in ("completed", "incomplete") and state["stop_mode"] == "none"
    assert front.value("_.id") == state["response_id"]
    assert front.value("_.output_text") == "".join(
        i["text"] for i in state["items"] if i["type"] == "message"
    )


def test_respond_falls_back_to_plain_output_elsewhere(front):
    out = front.run("%%respond --max-tokens 8 --seed 2\nAgain")  # no cellId: not JupyterLab
    assert not opened(front, out, "ResponseViewModel")
    assert [m for m in out if m["msg_type"] == "execute_result"]


def test_respond_tree_shows_the_conversation_and_follows_branches(front):
    head = front.value("_.id")
    out = front.run("%respond tree", cell_id="c2")
    [comm] = opened(front, out, "ConversationTreeModel")
    state = front.models[comm]
    assert state["current"] == head and head in {n["id"] for n in state["nodes"]}
    first = next(n for n in state["nodes"] if n["previous_response_id"] is None)
    front.send_custom(comm, {"type": "branch", "id": first["id"], "text": "other way"})
    front.wait(lambda: front.models[comm]["busy"] is True, 30)
    front.wait(lambda: front.models[comm]["busy"] is False, 60)
    new = front.models[comm]["current"]
    assert new != head and front.models[comm]["error"] == ""
    front.run("%%respond --max-tokens 8\nAnd then?")
    assert front.value("_.previous_response_id") == new  # the notebook follows the branch

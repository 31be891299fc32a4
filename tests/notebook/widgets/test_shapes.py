"""Pure parts of the widgets' Python side, on real server answers."""

from __future__ import annotations

import openai

from jupyter_superfluid.notebook.widgets.api import conversation, input_detail, node_detail
from jupyter_superfluid.notebook.widgets.state import ResponseState

CHATML = "superfluid/tiny-chatml"


def record(rid, parent, at):
    return {"id": rid, "previous_response_id": parent, "created_at": at, "model": "m",
            "status": "completed", "cached_tokens": 1, "preview": rid}  # fmt: skip


# a ─ b ─ c     x ─ y      (and z continues a hidden h)
RECORDS = [record("a", None, 1), record("b", "a", 2), record("c", "b", 3), record("x", None, 4),
           record("y", "x", 5), record("z", "h", 6)]  # fmt: skip


def test_conversation_is_the_connected_component():
    assert {n["id"] for n in conversation(RECORDS, "c")} == {"a", "b", "c"}
    assert {n["id"] for n in conversation(RECORDS, "x")} == {"x", "y"}
    assert {n["id"] for n in conversation(RECORDS, "h")} == {"z"}  # through a hidden parent
    assert conversation(RECORDS, "nope") == []
    assert len(conversation(RECORDS, None)) == len(RECORDS)
    assert set(conversation(RECORDS, "a")[0]) == {
        "id", "created_at", "model", "status", "previous_response_id", "cached_tokens", "preview"
    }  # fmt: skip


def test_a_response_that_did_not_stream_is_taken_whole(openai_client: openai.OpenAI):
    response = openai_client.responses.create(
        model="superfluid/tiny-qwen3", input="think", max_output_tokens=60, extra_body={"seed": 2}
    )
    data = response.model_dump(mode="json")
    state = ResponseState()
    assert state.apply({"type": "response.completed", "response": data, "streamed": False})
    assert state.response_id == response.id and state.status == data["status"]
    assert [i["type"] for i in state.items] == [o.type for o in response.output]
    assert state.items[0]["text"] == response.output[0].content[0].text  # the reasoning
    assert state.usage["reasoning_tokens"] == response.usage.output_tokens_details.reasoning_tokens
    assert state.usage["tokens_per_second"] is None  # nothing streamed: no speed to tell
    items = openai_client.responses.input_items.list(response.id).data
    detail = node_detail(data, [i.model_dump(mode="json") for i in items])
    assert detail["input"] == [{"type": "message", "role": "user", "text": "think"}]
    assert detail["output"] == state.items


def test_input_items_read_as_role_and_text():
    call = {"type": "function_call", "name": "f", "arguments": '{"a":1}', "call_id": "c"}
    said = {"type": "function_call", "role": "assistant", "text": 'f({"a":1})'}
    assert input_detail(call) == said
    out = {"type": "function_call_output", "call_id": "c", "output": "42"}
    assert input_detail(out) == {"type": "function_call_output", "role": "tool", "text": "42"}
    plain = {"type": "message", "role": "system", "content": "Be terse."}
    assert input_detail(plain)["text"] == "Be terse."

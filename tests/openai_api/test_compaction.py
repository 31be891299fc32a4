"""POST /v1/responses/compact through the openai SDK: a signed summary that continues a
conversation in fewer tokens; tampered or foreign blobs and a missing model are 400s."""

from __future__ import annotations

import base64
import json

import httpx
import openai
import pytest
from support.no_eos import RUN_TO_CAP

CHATML = "superfluid/tiny-chatml"


def conversation(client: openai.OpenAI, turns: int = 3) -> list:
    """A stored conversation of ``turns`` responses, each run to its cap (120 tokens)."""
    made, prev = [], None
    for n in range(turns):
        r = client.responses.create(
            model=CHATML,
            input=f"turn {n}: tell me about the river",
            previous_response_id=prev,
            max_output_tokens=120,
            extra_body=RUN_TO_CAP,
        )
        made.append(r)
        prev = r.id
    return made


def items(compacted) -> list[dict]:
    return [o.model_dump(exclude_none=True, warnings=False) for o in compacted.output]


def test_compacting_a_three_turn_conversation_continues_it_in_fewer_tokens(openai_client):
    last = conversation(openai_client)[-1]
    compacted = openai_client.responses.compact(model=CHATML, previous_response_id=last.id)
    assert compacted.object == "response.compaction" and compacted.usage.output_tokens > 0
    first, *kept = items(compacted)
    assert first["type"] == "compaction" and first["id"].startswith("cmp_")
    assert isinstance(first["encrypted_content"], str)
    # Kept verbatim: the last user message (no tool round is open).
    assert [(k["type"], k["role"]) for k in kept] == [("message", "user")]
    assert kept[0]["content"][0]["text"] == "turn 2: tell me about the river"
    nxt = {"role": "user", "content": "and then?"}
    full = openai_client.responses.input_tokens.count(
        model=CHATML, previous_response_id=last.id, input=[nxt]
    ).input_tokens
    small = openai_client.responses.input_tokens.count(
        model=CHATML, input=[*items(compacted), nxt]
    ).input_tokens
    assert small < full
    created = openai_client.responses.create(
        model=CHATML, input=[*items(compacted), nxt], max_output_tokens=3
    )
    assert created.usage.input_tokens == small < full
    # The stored input holds the summary the compaction item expanded to.
    stored = openai_client.responses.input_items.list(created.id, order="asc").data
    assert stored[0].type == "message" and stored[0].role == "developer"


def test_compacting_input_keeps_an_open_tool_round(openai_client):
    call = {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}
    out = {"type": "function_call_output", "call_id": "c1", "output": "42"}
    given = [
        {"type": "message", "role": "user", "content": "hello"},
        {"type": "message", "role": "assistant", "content": "hi"},
        {"type": "message", "role": "user", "content": "call f"},
        call,
        out,
    ]
    compacted = openai_client.responses.compact(model=CHATML, input=given)
    kept = items(compacted)[1:]
    assert [k["type"] for k in kept] == ["message", "function_call", "function_call_output"]
    assert kept[1]["call_id"] == "c1" and kept[2]["output"] == "42"


def tampered(blob: str) -> str:
    version, payload, sig = blob.split(".")
    data = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    data["summary"] = "something else"
    forged = base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")
    return f"{version}.{forged}.{sig}"


@pytest.mark.parametrize("alter", [tampered, lambda b: b[:-4] + "AAAA", lambda b: "gAAAAB-x"])
def test_a_tampered_or_foreign_blob_is_a_400(openai_client, alter):
    compacted = openai_client.responses.compact(model=CHATML, input="remember 7")
    bad = items(compacted)
    bad[0]["encrypted_content"] = alter(bad[0]["encrypted_content"])
    with pytest.raises(openai.BadRequestError) as info:
        openai_client.responses.create(model=CHATML, input=[*bad, {"role": "user", "content": "?"}])
    assert info.value.param == "input[0].encrypted_content"
    assert info.value.code == "invalid_encrypted_content"


def test_compact_needs_a_model(standalone):
    r = httpx.post(f"{standalone.base_url}/responses/compact", json={"input": "x"}, timeout=60)
    assert r.status_code == 400 and r.json()["error"]["param"] == "model"
    r = httpx.post(f"{standalone.base_url}/responses/compact", json={"model": CHATML}, timeout=60)
    assert r.status_code == 400 and r.json()["error"]["param"] == "input"

"""ResponseView in a real kernel against a real server: synced state, batching, Stop."""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
from support.no_eos import NO_EOS_WIRE

import jupyter_superfluid

ROOT = Path(__file__).resolve().parents[3]
CHATML = "superfluid/tiny-chatml"
STREAM = """
from jupyter_superfluid.notebook.widgets import ResponseView
from jupyter_superfluid.notebook.transport import run_openai
from jupyter_superfluid.notebook.result import Reply
from jupyter_superfluid import client
view = ResponseView()
deltas = []
def sink(event):
    deltas.append(event["type"].endswith(".delta"))
    view.on_event(event)
view.start(None)
params = {{"model": "{model}", "input": "hi", "max_output_tokens": {n}, "extra_body": {extra}}}
final = run_openai(client(max_retries=0), params, stream=True, on_event=sink)
view.finish(Reply(final))
"""


def test_model_and_view_versions_match_the_package(front):
    front.run("from jupyter_superfluid.notebook.widgets import ResponseView\nv = ResponseView()")
    state = front.models[front.comm_of("v")]
    version = jupyter_superfluid.__version__
    assert state["_model_module"] == state["_view_module"] == "jupyter-superfluid"
    assert state["_model_module_version"] == state["_view_module_version"] == version
    assert (state["_model_name"], state["_view_name"]) == ("ResponseViewModel", "ResponseViewView")
    package = json.loads((ROOT / "labextension/package.json").read_text())
    contract = (ROOT / "labextension/src/contract.ts").read_text()
    assert package["version"] == version
    assert re.search(r"MODULE_VERSION = '([^']+)'", contract).group(1) == version
    assert re.search(r"MODULE_NAME = '([^']+)'", contract).group(1) == package["name"]
    for trait in ("response_id", "model", "status", "items", "usage", "error", "stop_mode"):
        assert trait in state and f"  {trait}:" in contract


def test_stream_is_synced_in_batches_and_ends_with_the_response(front, standalone):
    front.run(STREAM.format(model=CHATML, n=1200, extra={"seed": 1, "logit_bias": NO_EOS_WIRE}))
    comm = front.comm_of("view")
    updates = front.updates(comm)
    deltas = front.value("sum(deltas)")
    texts = [u["items"][-1]["text"] for u in updates if u.get("items") and u["items"][-1]["text"]]
    assert deltas > 100
    assert len(texts) >= 2 and texts == sorted(texts, key=len)  # grew over several syncs
    assert len(updates) * 5 < deltas  # batched: far fewer comm messages than tokens
    state = front.models[comm]
    final = front.value("final")
    assert state["status"] == final["status"] == "incomplete"
    assert state["response_id"] == final["id"] and state["model"] == CHATML
    assert state["items"] == [
        {
            "type": "message",
            "id": final["output"][0]["id"],
            "text": final["output"][0]["content"][0]["text"],
            "status": final["output"][0]["status"],
        }
    ]
    usage = state["usage"]
    assert usage["output_tokens"] == final["usage"]["output_tokens"] == 1200
    assert usage["input_tokens"] == final["usage"]["input_tokens"]
    assert usage["cached_tokens"] == final["usage"]["input_tokens_details"]["cached_tokens"]
    assert usage["tokens_per_second"] > 0
    assert state["stop_mode"] == "none"
    assert front.value("view.syncs") == len(updates)
    assert httpx.get(f"{standalone.base_url}/responses/{final['id']}").status_code == 200


def test_reasoning_and_function_call_items_with_tool_output(front):
    front.run(
        """
from jupyter_superfluid.notebook.widgets import ResponseView
from jupyter_superfluid.notebook.transport import run_openai
from jupyter_superfluid.notebook.result import Reply
from jupyter_superfluid import client
CRM = {"type": "namespace", "name": "crm", "description": "Customers.", "tools": [{
    "type": "function", "name": "lookup", "parameters": {"type": "object",
    "properties": {"id": {"type": "integer"}}, "required": ["id"],
    "additionalProperties": False}}]}
tv = ResponseView()
tv.start(None)
final = run_openai(client(max_retries=0), {"model": "superfluid/tiny-qwen3", "input": "call",
    "tools": [CRM], "tool_choice": {"type": "function", "name": "crm.lookup"},
    "max_output_tokens": 200, "extra_body": {"seed": 5}}, stream=True, on_event=tv.on_event)
final = final.model_dump(mode="json")
call = [o for o in final["output"] if o["type"] == "function_call"][0]
tv.on_event({"type": "superfluid.tool_output", "call_id": call["call_id"], "name": "lookup",
    "arguments": call["arguments"], "output": '{"name": "Ada"}'})
tv.finish(Reply(final))
"""
    )
    state = front.models[front.comm_of("tv")]
    final = front.value("final")
    kinds = [i["type"] for i in state["items"]]
    assert kinds == [o["type"] for o in final["output"]] and "function_call" in kinds
    call = next(i for i in state["items"] if i["type"] == "function_call")
    assert (call["name"], call["namespace"]) == ("lookup", "crm")
    assert isinstance(json.loads(call["arguments"])["id"], int)
    assert call["output"] == '{"name": "Ada"}' and call["status"] == "completed"
    if kinds[0] == "reasoning":
        assert state["items"][0]["text"] and state["usage"]["reasoning_tokens"] > 0


BACKGROUND = """
import threading
from jupyter_superfluid.notebook.widgets import ResponseView
from jupyter_superfluid.notebook.transport import Cancelled, run_openai
from jupyter_superfluid import client
bg = ResponseView()
def work():
    bg.start(None)
    params = {{"model": "{model}", "input": "go", "max_output_tokens": 1900,
              "extra_body": {{"seed": 0, "logit_bias": {bias}}}}}
    try:
        run_openai(client(max_retries=0), params, stream=True, on_event=bg.on_event)
    except Cancelled as exc:
        bg.finish(None, str(exc))
worker = threading.Thread(target=work)
worker.start()
"""


def test_stop_message_cancels_a_background_stream(front, standalone):
    front.run(BACKGROUND.format(model=CHATML, bias=NO_EOS_WIRE))
    comm = front.comm_of("bg")
    front.wait(lambda: bool(front.models[comm].get("response_id")), 30)
    assert front.models[comm]["stop_mode"] == "message"  # the kernel is free: a message will do
    response_id = front.models[comm]["response_id"]
    front.send_custom(comm, {"type": "stop"})
    front.wait(lambda: front.models[comm]["status"] == "cancelled", 30)
    front.run("worker.join(30)")
    state = front.models[comm]
    assert state["stop_mode"] == "none" and state["usage"] is None
    assert "cancelled" in state["error"] and state["items"][0]["status"] == "incomplete"
    assert front.value("bg.stop_requested") is True
    assert httpx.get(f"{standalone.base_url}/responses/{response_id}").status_code == 404

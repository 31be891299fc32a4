"""The raw Responses stream: its exact event sequences, both reasoning-event namings, ``[DONE]``.

Reasoning streams as ``response.reasoning_text.*`` (OpenAI's names) by default and as
``response.reasoning.*`` (OpenResponses') when the request carries
``OpenResponses-Version``; every stream ends with ``data: [DONE]``. Recorded streams
of each kind are fed to the openai SDK's and the openai-agents SDK's stream parsers.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import openai
import pytest
from agents import Agent, OpenAIResponsesModel, Runner, set_tracing_disabled
from openai.types.responses import ResponseReasoningTextDeltaEvent
from support.openresponses_schema import validate_event, validate_response

QWEN = "superfluid/tiny-qwen3"
THINK = {"model": QWEN, "input": "think", "max_output_tokens": 40, "seed": 2, "stream": True}
OPENRESPONSES = {"OpenResponses-Version": "2026-04-24"}


def raw_stream(base_url: str, headers: dict[str, str] | None = None) -> tuple[str, list[str]]:
    """The stream's text and its lines."""
    with httpx.stream(
        "POST", base_url + "/responses", json=THINK, headers=headers, timeout=60
    ) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        text = r.read().decode()
    return text, text.splitlines()


def events_of(lines: list[str]) -> list[dict[str, Any]]:
    datas = [ln[6:] for ln in lines if ln.startswith("data: ")]
    assert datas[-1] == "[DONE]" and "[DONE]" not in datas[:-1]
    return [json.loads(d) for d in datas[:-1]]


def expected_sequence(final: dict[str, Any], reasoning: str, deltas: dict[int, int]) -> list[str]:
    """The exact event types of a stream whose final response is ``final``."""
    names = ["response.created", "response.in_progress"]
    for i, item in enumerate(final["output"]):
        kind = {"reasoning": f"response.{reasoning}", "message": "response.output_text"}[
            item["type"]
        ]
        names += ["response.output_item.added", "response.content_part.added"]
        names += [f"{kind}.delta"] * deltas[i]
        names += [f"{kind}.done", "response.content_part.done", "response.output_item.done"]
    return [*names, f"response.{final['status']}"]


@pytest.mark.parametrize(
    ("headers", "reasoning"),
    [(None, "reasoning_text"), (OPENRESPONSES, "reasoning")],
)
def test_exact_sequence_and_the_last_line(standalone, headers, reasoning):
    text, lines = raw_stream(standalone.base_url, headers)
    assert text.endswith("\n\ndata: [DONE]\n\n")
    assert [ln for ln in lines if ln][-1] == "data: [DONE]"
    events = events_of(lines)
    names = [ln[7:] for ln in lines if ln.startswith("event: ")]
    assert names == [e["type"] for e in events]  # [DONE] alone has no event: line
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    final = events[-1]["response"]
    assert final["output"][0]["type"] == "reasoning"
    deltas = {
        i: sum(1 for e in events if e["type"].endswith(".delta") and e["output_index"] == i)
        for i in range(len(final["output"]))
    }
    assert deltas[0] > 0
    assert [e["type"] for e in events] == expected_sequence(final, reasoning, deltas)
    streamed = "".join(e["delta"] for e in events if e["type"] == f"response.{reasoning}.delta")
    assert streamed == final["output"][0]["content"][0]["text"]
    if reasoning == "reasoning":  # OpenResponses' own names validate without aliases
        for e in events:
            validate_event(e)
        validate_response(final)


def test_the_header_changes_only_the_reasoning_names(standalone):
    _, plain = raw_stream(standalone.base_url)
    _, named = raw_stream(standalone.base_url, OPENRESPONSES)
    renamed = [
        e | {"type": e["type"].replace("response.reasoning.", "response.reasoning_text.")}
        for e in events_of(named)
    ]
    a, b = events_of(plain), renamed
    assert [e["type"] for e in a] == [e["type"] for e in b]
    assert [e.get("delta") for e in a] == [e.get("delta") for e in b]  # seeded: same text


@pytest.fixture(scope="module")
def recorded(standalone) -> dict[str, str]:
    """A stream of each naming, as this server sends it."""
    return {
        "openai": raw_stream(standalone.base_url)[0],
        "openresponses": raw_stream(standalone.base_url, OPENRESPONSES)[0],
    }


def replaying(text: str) -> httpx.MockTransport:
    return httpx.MockTransport(
        lambda request: httpx.Response(
            200, headers={"content-type": "text/event-stream"}, content=text.encode()
        )
    )


@pytest.mark.parametrize("naming", ["openai", "openresponses"])
def test_the_openai_sdk_parses_either_stream_to_its_end(recorded, naming):
    http = httpx.Client(transport=replaying(recorded[naming]))
    client = openai.OpenAI(base_url="http://sf/v1", api_key="k", http_client=http)
    with client.responses.stream(model=QWEN, input="think") as stream:
        events = list(stream)  # [DONE] ends the iteration
        final = stream.get_final_response()
    last = json.loads(recorded[naming].split("data: ")[-2])
    assert final.id == last["response"]["id"] and final.status == last["response"]["status"]
    assert len(events) == recorded[naming].count("event: ")
    deltas = [e for e in events if "reasoning" in e.type and e.type.endswith(".delta")]
    assert deltas
    # Why OpenAI's names stay the default: the SDK types only those as reasoning deltas.
    typed = all(isinstance(e, ResponseReasoningTextDeltaEvent) for e in deltas)
    assert typed == (naming == "openai")


@pytest.mark.parametrize("naming", ["openai", "openresponses"])
def test_the_agents_sdk_runs_either_stream_to_its_end(recorded, naming):
    set_tracing_disabled(True)

    async def run() -> tuple[list[str], list[Any]]:
        http = httpx.AsyncClient(transport=replaying(recorded[naming]))
        client = openai.AsyncOpenAI(base_url="http://sf/v1", api_key="k", http_client=http)
        agent = Agent(name="a", model=OpenAIResponsesModel(model=QWEN, openai_client=client))
        result = Runner.run_streamed(agent, "think")
        kinds = [
            e.data.type async for e in result.stream_events() if e.type == "raw_response_event"
        ]
        return kinds, result.new_items

    kinds, items = asyncio.run(run())
    assert len(kinds) == recorded[naming].count("event: ")
    assert [type(i).__name__ for i in items][:1] == ["ReasoningItem"]
    assert items[0].raw_item.content[0].text

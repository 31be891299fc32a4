"""Helpers of the LMSP tests: request bodies, an SSE reader, problem-document checks."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
from support.no_eos import NO_EOS_WIRE

CHATML = "superfluid/tiny-chatml"
QWEN = "superfluid/tiny-qwen3"
PROBLEM_TYPE = "application/problem+json"
FINAL = ("response.completed", "response.incomplete", "response.failed", "response.cancelled")
PROBLEM_KEYS = {"type", "title", "status", "detail", "code"}


def auth(key: str) -> dict[str, str]:
    """The Authorization header of a key."""
    return {"Authorization": f"Bearer {key}"}


def user(text: str) -> dict[str, Any]:
    """A user message input item."""
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def request(model: str = CHATML, text: str = "hi", **fields: Any) -> dict[str, Any]:
    """An LMSP responses request; ``seed``/``logit_bias``/... go into the superfluid extension."""
    ext = {
        k: fields.pop(k) for k in ("seed", "logit_bias", "reasoning_effort", "stop") if k in fields
    }
    body: dict[str, Any] = {"model": model, "input": [user(text)], **fields}
    if ext:
        body.setdefault("extensions", {})["superfluid"] = ext
    return body


def long_request(tokens: int, **fields: Any) -> dict[str, Any]:
    """A request that surely generates ``tokens`` tokens."""
    return request(max_output_tokens=tokens, logit_bias=NO_EOS_WIRE, seed=1, **fields)


@dataclass
class Event:
    """One server-sent event."""

    id: int | None
    name: str
    data: dict[str, Any]


def parse_block(block: list[str]) -> Event:
    """An event from its lines."""
    fields: dict[str, str] = {}
    for line in block:
        key, _, value = line.partition(": ")
        fields[key] = value
    number = int(fields["id"]) if "id" in fields else None
    return Event(number, fields["event"], json.loads(fields["data"]))


def iter_events(response: httpx.Response) -> Iterator[Event]:
    """Events of a streamed response as they arrive."""
    block: list[str] = []
    for line in response.iter_lines():
        if line:
            block.append(line)
        elif block:
            yield parse_block(block)
            block = []
    if block:
        yield parse_block(block)


def events_of(text: str) -> list[Event]:
    """Events of a whole SSE body."""
    blocks = [b.strip().splitlines() for b in text.split("\n\n") if b.strip()]
    return [parse_block(b) for b in blocks]


def assert_problem(
    r: httpx.Response, status: int, code: str, param: str | None = None
) -> dict[str, Any]:
    """``r`` is an RFC 9457 problem document of ``status`` and ``code``."""
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith(PROBLEM_TYPE)
    assert r.headers["lmsp-version"] == "1.0"
    doc = r.json()
    assert set(doc) == PROBLEM_KEYS | ({"param"} if param else set()), doc
    assert doc["status"] == status and doc["code"] == code
    assert isinstance(doc["title"], str) and doc["title"]
    assert isinstance(doc["detail"], str) and doc["detail"]
    if param:
        assert doc["param"] == param
    return doc


def wait_task(url: str, task_id: str, headers: dict[str, str] | None = None) -> dict[str, Any]:
    """Poll a task until it is final."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        task = httpx.get(f"{url}/tasks/{task_id}", headers=headers, timeout=30).json()
        if task["status"] not in ("queued", "running"):
            return task
        time.sleep(0.05)
    raise AssertionError(f"task {task_id} did not finish")

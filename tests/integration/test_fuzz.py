"""Fuzzing every endpoint of both protocols and the models API: malformed bodies, params, headers.

A seeded generator mutates valid requests (a field replaced by junk of another
type, an out-of-range number, a lone surrogate, NaN, deep nesting, a schema
that is not one, ...) and sends raw bodies that are not JSON at all. Every
answer must be below 500, none may hang, the server must stay alive, and a
normal request must still be answered afterwards.
"""

from __future__ import annotations

import copy
import json
import random
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.no_eos import RUN_TO_CAP
from websockets.sync.client import connect

from jupyter_superfluid.pytest_plugin import StandaloneServer, start_standalone

CHATML = "superfluid/tiny-chatml"
QWEN = "superfluid/tiny-qwen3"
SEED = 20261201
ROUNDS = 10000
DEEP = 200
MISSING_GGUF = "/nonexistent/fuzz.gguf"


def nested(depth: int) -> Any:
    """A list nested ``depth`` deep."""
    value: Any = 0
    for _ in range(depth):
        value = [value]
    return value


JUNK: list[Any] = [
    None,
    True,
    0,
    -1,
    5,
    2**64,
    -(2**70),
    1.5,
    1e308,
    "",
    "x",
    "\ud800",
    "a\udfffb",
    "²",
    "x" * 5000,
    [],
    [1, 2],
    [[]],
    {},
    {"a": []},
    {"type": 5},
    {"type": ["message"]},
    {"role": ["user"]},
    nested(8),
]
SCHEMAS: list[Any] = [
    {"properties": []},
    {"$ref": 5},
    {"anyOf": []},
    {"items": [1, 2]},
    {"type": "string", "maxLength": 100000},
    {"type": "array", "minItems": 10**9},
    {"type": "object", "properties": {"a": {"type": "string", "minLength": 5000}}},
    {"enum": list(range(5000))},
    {"type": "nope"},
    {"$ref": "#/nowhere"},
    nested(50),
    {"type": "object", "properties": {"a": nested(40)}},
    "string",
    [],
]


def user_item(text: str = "hi") -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


# Keys a mutation may add to an object of the body: fields of another part or item type.
EXTRA_KEYS = ["text", "refusal", "type", "role", "content", "name", "output", "summary"]


COMPACT = "/v1/responses/compact"
INPUT_FILE = {"type": "input_file", "filename": "notes.md", "file_data": "IyBOb3Rlcwo="}


def seeds(rid: str) -> dict[str, dict[str, Any]]:
    """A valid body per creating endpoint."""
    tool = {
        "type": "function",
        "name": "get_weather",
        "description": "Weather.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    }
    return {
        "/v1/chat/completions": {
            "model": CHATML,
            "messages": [
                {"role": "system", "content": "Be terse."},
                {"role": "user", "content": [{"type": "text", "text": "hi"}]},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "f", "arguments": "{}"},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "c1", "content": "ok"},
            ],
            "max_tokens": 2,
            "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}],
            "tool_choice": "auto",
            "response_format": {"type": "json_schema", "json_schema": {"name": "o", "schema": {}}},
            "logit_bias": {"5": 1},
            "stop": ["x"],
            "seed": 1,
        },
        "/v1/completions": {
            "model": QWEN,
            "prompt": "def f(",
            "suffix": "\n    return x",
            "max_tokens": 2,
            "temperature": 0.5,
            "top_p": 0.9,
            "seed": 1,
            "stop": ["x"],
            "stream": True,
            "stream_options": {"include_usage": True},
            "logit_bias": {"5": 1},
            "n": 1,
            "echo": False,
        },
        "/v1/responses": {
            "model": QWEN,
            "input": [
                user_item(),
                {"role": "user", "content": [{"type": "refusal", "refusal": "no"}, INPUT_FILE]},
                {
                    "type": "function_call",
                    "call_id": "c1",
                    "name": "get_weather",
                    "arguments": "{}",
                },
                {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
                {
                    "type": "reasoning",
                    "summary": [],
                    "content": [{"type": "reasoning_text", "text": "t"}],
                },
            ],
            "instructions": "Be terse.",
            "max_output_tokens": 2,
            "tools": [tool],
            "tool_choice": {"type": "function", "name": "get_weather"},
            "text": {"format": {"type": "json_schema", "name": "o", "schema": {"type": "object"}}},
            "reasoning": {"effort": "none"},
            "metadata": {"k": "v"},
            "temperature": 0.5,
            "previous_response_id": rid,
        },
        "/lmsp/v1/responses": {
            "model": QWEN,
            "input": [user_item()],
            "max_output_tokens": 2,
            "tools": [tool],
            "tool_choice": "auto",
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "o", "schema": {"type": "object"}},
            },
            "store": True,
            "extensions": {"superfluid": {"seed": 1, "logit_bias": {"5": 1}, "stop": ["x"]}},
        },
        COMPACT: {
            "model": CHATML,
            "input": [user_item(), {"role": "assistant", "content": "ok"}],
            "instructions": "Be terse.",
            "previous_response_id": rid,
        },
        # A model whose file is not there: it is added (and fails to load), or refused.
        "/superfluid/v1/models": {"spec": f"fuzz={MISSING_GGUF}", "load": True},
        # Counted, not run: create's body, and an input file with it.
        "/v1/responses/input_tokens": {
            "model": QWEN,
            "input": [
                user_item(),
                {"role": "user", "content": [INPUT_FILE]},
                {
                    "type": "function_call",
                    "call_id": "c1",
                    "name": "get_weather",
                    "arguments": "{}",
                },
                {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
            ],
            "instructions": "Be terse.",
            "tools": [tool],
            "previous_response_id": rid,
        },
    }


def paths(node: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every path to a value inside ``node``."""
    yield prefix
    if len(prefix) > 12:
        return
    if isinstance(node, dict):
        for key, value in node.items():
            yield from paths(value, (*prefix, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from paths(value, (*prefix, i))


def get(body: Any, path: tuple[Any, ...]) -> Any:
    """The value at ``path`` inside ``body``."""
    for part in path:
        body = body[part]
    return body


def put(body: Any, path: tuple[Any, ...], value: Any) -> Any:
    """``body`` with the value at ``path`` replaced (the whole body for an empty path)."""
    if not path:
        return value
    node = body
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    return body


class Fuzzer:
    """Seeded malformed requests."""

    def __init__(self, seed: int, rid: str, task_id: str) -> None:
        self.rng = random.Random(seed)
        self.rid, self.task_id = rid, task_id
        self.seeds = seeds(rid)
        self.created = [rid]  # stored responses the run made: their items are listed

    def junk(self) -> Any:
        roll = self.rng.random()
        if roll < 0.1:
            return nested(self.rng.choice([70, DEEP, 400]))
        if roll < 0.2:
            return copy.deepcopy(self.rng.choice(SCHEMAS))
        return copy.deepcopy(self.rng.choice(JUNK))

    def mutated(self, path: str) -> Any:
        body = copy.deepcopy(self.seeds[path])
        for _ in range(self.rng.choice([1, 1, 1, 2, 3])):
            target = self.rng.choice(list(paths(body)))
            body = put(body, target, self.junk())
        if self.rng.random() < 0.2:
            body = self.extra_field(body)
        if self.rng.random() < 0.15 and isinstance(body, dict):
            body["stream"] = True
        if self.rng.random() < 0.1 and isinstance(body, dict):
            body[self.rng.choice(["schema", "parameters", "format"])] = self.junk()
        return body

    def extra_field(self, body: Any) -> Any:
        """``body`` with an extra key (another type's field, junk valued) on one of its objects."""
        objects = [p for p in paths(body) if isinstance(get(body, p), dict)]
        if objects:
            target = get(body, self.rng.choice(objects))
            target[self.rng.choice(EXTRA_KEYS)] = self.junk()
        return body

    def raw(self) -> bytes:
        return self.rng.choice(
            [
                b"",
                b"{",
                b"[1, 2]",
                b"\xff\xfe\x00",
                b'{"model": NaN, "input": "x"}',
                b'{"model": "m", "input": Infinity}',
                b'{"input": "\\ud800"}',
                b"[" * 5000 + b"]" * 5000,
                b'{"a": ' * 3000 + b"1" + b"}" * 3000,
                json.dumps({"x": "y" * 100}).encode(),
                bytes(self.rng.randrange(256) for _ in range(64)),
            ]
        )

    def word(self) -> str:
        return self.rng.choice(
            ["x", "", "-1", "0", "18446744073709551616", "²", "1e3", "%00", "\u00e9", "9" * 40]
        )

    def request(self) -> tuple[str, str, dict[str, Any]]:
        """One (method, path, httpx kwargs)."""
        roll = self.rng.random()
        headers = self.headers()
        if roll < 0.55:
            path = self.rng.choice([p for p in self.seeds if p != COMPACT])
            if path == "/lmsp/v1/responses" and self.rng.random() < 0.3:
                path = "/lmsp/v1/tasks"
            if self.rng.random() < 0.2:
                return "POST", path, {"content": self.raw(), "headers": headers}
            source = path.replace("/tasks", "/responses")
            body = self.mutated(source)
            return "POST", path, {"content": json.dumps(body).encode(), "headers": headers}
        if roll < 0.6:
            body = self.mutated(COMPACT)
            return "POST", COMPACT, {"content": json.dumps(body).encode(), "headers": headers}
        return self.lookup(headers)

    def lookup(self, headers: dict[str, bytes]) -> tuple[str, str, dict[str, Any]]:
        made = self.rng.choice(self.created)
        rid = self.rng.choice([self.rid, made, made, "resp_" + self.word(), self.word() or "x"])
        tid = self.rng.choice([self.task_id, "task_" + self.word(), "x"])
        params = {
            k: self.word() if self.rng.random() < 0.7 else self.rid
            for k in self.rng.sample(
                ["limit", "order", "after", "include", "delete_files", "starting_after"], 2
            )
        }
        method, path = self.rng.choice(
            [
                ("GET", "/v1/models"),
                ("GET", f"/v1/models/{self.word()}"),
                ("GET", "/v1/responses"),
                ("GET", f"/v1/responses/{rid}"),
                ("GET", f"/v1/responses/{rid}?stream=true"),
                ("DELETE", f"/v1/responses/resp_{self.word()}"),
                ("GET", f"/v1/responses/{rid}/input_items"),
                ("POST", f"/v1/responses/{rid}/cancel"),
                ("GET", "/v1/openapi.json"),
                ("GET", "/lmsp/v1"),
                ("GET", "/lmsp/v1/models"),
                ("GET", f"/lmsp/v1/models/{self.word()}"),
                ("GET", f"/lmsp/v1/responses/{rid}"),
                ("GET", f"/lmsp/v1/tasks/{tid}"),
                ("GET", f"/lmsp/v1/tasks/{tid}/events"),
                ("POST", f"/lmsp/v1/tasks/task_{self.word()}/cancel"),
                ("PUT", "/lmsp/v1/responses"),
                ("GET", f"/lmsp/v1/{self.word()}"),
                # Never a served model's id: the run must leave the served set as it was.
                ("GET", "/superfluid/v1/models"),
                ("GET", f"/superfluid/v1/models/{self.word()}"),
                ("POST", f"/superfluid/v1/models/{self.word()}/load"),
                ("POST", f"/superfluid/v1/models/{self.word()}/unload"),
                ("DELETE", f"/superfluid/v1/models/{self.word()}"),
            ]
        )
        if path.endswith("/events") and self.rng.random() < 0.5:
            headers["Last-Event-ID"] = self.word().encode()
        return method, path, {"params": params, "headers": headers}

    def headers(self) -> dict[str, bytes]:
        headers: dict[str, bytes] = {}
        for name, values in [
            ("LMSP-Version", ["1.0", "2", "", "x" * 300]),
            ("Idempotency-Key", ["k1", "", "a b", "k" * 300, "\u00e9"]),
            ("Content-Type", ["application/json", "text/plain", "x"]),
            ("Authorization", ["Bearer x", "Basic eA==", "", "token"]),
        ]:
            if self.rng.random() < 0.2:
                headers[name] = self.rng.choice(values).encode("utf-8", "surrogatepass")
        return headers


def assert_stored_items_list(http: httpx.Client, created: list[str]) -> None:
    """Every stored response of the run lists its input items, and the listing pages through."""
    for rid in created:
        r = http.get(f"/v1/responses/{rid}/input_items", params={"limit": 100})
        assert r.status_code == 200, (rid, r.text)
    seen: list[str] = []
    after: dict[str, str] = {}
    while True:
        page = http.get("/v1/responses", params={"limit": 100, **after})
        assert page.status_code == 200, page.text
        seen += [row["id"] for row in page.json()["data"]]
        if not page.json()["has_more"]:
            break
        after = {"after": page.json()["last_id"]}
    assert set(created) <= set(seen)


@pytest.fixture(scope="module")
def fuzzed(
    sf_model_cache: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[StandaloneServer]:
    """A server of its own, answering at most 4 tokens unless a request asks for more."""
    server = start_standalone(
        sf_model_cache,
        tmp_path_factory.mktemp("fuzz"),
        "--max-tokens=4",
        "--ws-messages-per-second=0",
    )
    yield server
    server.stop()


def test_no_input_gets_a_5xx_or_a_hang(fuzzed):
    url = fuzzed.url
    with httpx.Client(base_url=url, timeout=60) as http:
        made = http.post(
            "/v1/responses", json={"model": CHATML, "input": "x", "max_output_tokens": 2}
        )
        assert made.status_code == 200, made.text
        body = {"model": CHATML, "input": [user_item()], "max_output_tokens": 2}
        task = http.post("/lmsp/v1/tasks", json=body)
        assert task.status_code == 202, task.text
        fuzzer = Fuzzer(SEED, made.json()["id"], task.json()["id"])
        statuses: Counter[int] = Counter()
        started = time.monotonic()
        for n in range(ROUNDS):
            method, path, kwargs = fuzzer.request()
            r = http.request(method, path, **kwargs)
            statuses[r.status_code] += 1
            assert r.status_code < 500, (n, method, path, kwargs, fuzzed.log()[-4000:])
            assert fuzzed.process.poll() is None, fuzzed.log()[-3000:]
            made_one = (method, path, r.status_code) == ("POST", "/v1/responses", 200)
            if made_one and r.headers["content-type"].startswith("application/json"):
                fuzzer.created.append(r.json()["id"])
        elapsed = time.monotonic() - started
        print(f"fuzz: {ROUNDS} requests in {elapsed:.1f}s: {dict(sorted(statuses.items()))}")
        assert statuses[400] > ROUNDS // 3  # the generator does reach the validators
        assert len(fuzzer.created) > 20  # fuzzed creates were stored, and listed below
        assert_stored_items_list(http, fuzzer.created)
        still = {"model": CHATML, "input": "still", "max_output_tokens": 2, **RUN_TO_CAP}
        ok = http.post("/v1/responses", json=still)
        assert ok.status_code == 200 and ok.json()["status"] == "incomplete"
        lmsp = http.post("/lmsp/v1/responses", json=body)
        assert lmsp.status_code == 200 and lmsp.json()["object"] == "response"


WS_ROUNDS = 400
WS_FINAL = ("response.completed", "response.incomplete", "response.failed")


def ws_message(fuzzer: Fuzzer) -> str | bytes:
    """A mutated ``response.create`` (or raw bytes, or another type) for WebSocket mode."""
    roll = fuzzer.rng.random()
    if roll < 0.15:
        return fuzzer.raw()
    body = fuzzer.mutated("/v1/responses")
    if not isinstance(body, dict):
        return json.dumps(body)
    kind = "response.create" if roll < 0.9 else fuzzer.word()
    return json.dumps({"type": kind, **body})


def ws_answer(ws: Any) -> list[dict[str, Any]]:
    """The events one message got: up to a final event, or its one error event."""
    events: list[dict[str, Any]] = []
    while True:
        try:
            event = json.loads(ws.recv(timeout=60 if not events else 5))
        except TimeoutError:
            assert events and events[-1]["type"] == "error", events[-3:]
            return events  # an error ended a response that had begun
        events.append(event)
        if event["type"] in WS_FINAL or (event["type"] == "error" and "status" in event):
            return events


def test_no_websocket_message_gets_an_internal_error_or_a_dropped_connection(fuzzed):
    body = {"model": CHATML, "input": "x", "max_output_tokens": 2}
    made = httpx.post(f"{fuzzed.url}/v1/responses", json=body, timeout=60)
    assert made.status_code == 200, made.text
    fuzzer = Fuzzer(SEED + 1, made.json()["id"], "task_x")
    url = fuzzed.url.replace("http://", "ws://") + "/v1/responses"
    kinds: Counter[str] = Counter()
    with connect(url, open_timeout=30, max_size=None) as ws:
        for n in range(WS_ROUNDS):
            message = ws_message(fuzzer)
            ws.send(message)
            events = ws_answer(ws)
            codes = [e.get("error", {}).get("code") for e in events if e["type"] == "error"]
            assert "internal_error" not in codes, (n, message, events[-2:])
            assert all(e.get("status", 400) < 500 for e in events), (n, message, events[-2:])
            kinds[events[-1]["type"]] += 1
        ok = {"type": "response.create", "model": CHATML, "input": "ok", "max_output_tokens": 2}
        ws.send(json.dumps(ok))
        assert ws_answer(ws)[-1]["type"] in WS_FINAL  # still open, still answering
    print(f"ws fuzz: {WS_ROUNDS} messages: {dict(kinds)}")
    assert kinds["error"] > WS_ROUNDS // 3 and sum(kinds[k] for k in WS_FINAL) > 5

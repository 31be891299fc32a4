"""WebSocket mode of /v1/responses with a real client (``websockets``): several responses
on one connection, store: false continued warm, errors as events, auth, limits, shutdown."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.no_eos import RUN_TO_CAP
from websockets.asyncio.client import connect as aconnect
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import ClientConnection, connect

CHATML = "superfluid/tiny-chatml"
FINAL = ("response.completed", "response.incomplete", "response.failed")


def ws_url(server, key: str | None = None) -> tuple[str, dict[str, str]]:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return server.url.replace("http://", "ws://") + "/v1/responses", headers


def open_ws(server, key: str | None = None) -> ClientConnection:
    url, headers = ws_url(server, key)
    return connect(url, additional_headers=headers, open_timeout=30)


def create(ws: ClientConnection, **body: Any) -> list[dict]:
    """Send one response.create; its events, up to its final one (or one error event)."""
    ws.send(json.dumps({"type": "response.create", **body}))
    events = []
    while True:
        event = json.loads(ws.recv(timeout=60))
        events.append(event)
        if event["type"] in FINAL or (event["type"] == "error" and len(events) == 1):
            return events


def completed(ws: ClientConnection, **body: Any) -> dict:
    """A response that ended normally (tiny models end on their own for some seed)."""
    for seed in range(40):
        final = create(ws, seed=seed, max_output_tokens=120, **body)[-1]
        if final["type"] == "response.completed":
            return final["response"]
    raise AssertionError("no seed gave a completed response")


def test_several_responses_on_one_connection(standalone):
    with open_ws(standalone) as ws:
        ids = []
        for n in range(3):
            events = create(ws, model=CHATML, input=f"hi {n}", max_output_tokens=6, **RUN_TO_CAP)
            assert [e["sequence_number"] for e in events] == list(range(len(events)))
            assert [e["type"] for e in events[:2]] == ["response.created", "response.in_progress"]
            assert events[-1]["type"] == "response.incomplete"
            assert events[-1]["response"]["usage"]["output_tokens"] == 6
            ids.append(events[-1]["response"]["id"])
        assert len(set(ids)) == 3


def test_store_false_continues_warm_on_its_connection_only(standalone):
    with open_ws(standalone) as ws:
        first = completed(ws, model=CHATML, input="My name is Ada.", store=False)
        events = create(
            ws, previous_response_id=first["id"], input="Name?", store=False, max_output_tokens=4
        )
        final = events[-1]["response"]
        assert events[-1]["type"] in FINAL[:2]
        assert final["usage"]["input_tokens_details"]["cached_tokens"] > 0
        assert final["previous_response_id"] == first["id"]
        # A stored response cannot continue the unstored one.
        refused = create(ws, previous_response_id=final["id"], input="x", max_output_tokens=2)
        assert refused == [
            {
                "type": "error",
                "status": 400,
                "error": {
                    "type": "invalid_request_error",
                    "code": "invalid_request",
                    "message": refused[0]["error"]["message"],
                    "param": "previous_response_id",
                },
            }
        ]
    with open_ws(standalone) as ws:  # after a reconnect the connection's state is gone
        [error] = create(ws, previous_response_id=final["id"], input="again", store=False)
        assert error["type"] == "error" and error["status"] == 400
        assert error["error"]["code"] == "previous_response_not_found"
        assert error["error"]["param"] == "previous_response_id"


def test_a_stored_response_continues_as_over_http(standalone):
    with open_ws(standalone) as ws:
        first = completed(ws, model=CHATML, input="stored")
    with open_ws(standalone) as ws:
        final = create(ws, previous_response_id=first["id"], input="next", max_output_tokens=3)[-1]
        assert final["type"] in FINAL[:2]
        assert final["response"]["usage"]["input_tokens_details"]["cached_tokens"] > 0


@pytest.mark.parametrize(
    ("message", "param"),
    [
        ("not json", None),
        ("[1]", "type"),
        (json.dumps({"type": "response.cancel"}), "type"),
        (
            json.dumps({"type": "response.create", "model": CHATML, "input": "x", "stream": True}),
            "stream",
        ),
        (json.dumps({"type": "response.create", "model": CHATML, "input": 3}), "input"),
        (json.dumps({"type": "response.create", "model": "nope", "input": "x"}), "model"),
    ],
)
def test_a_bad_message_gets_an_error_event_and_the_connection_goes_on(standalone, message, param):
    with open_ws(standalone) as ws:
        ws.send(message)
        error = json.loads(ws.recv(timeout=30))
        assert error["type"] == "error" and error["status"] == 400
        assert set(error["error"]) == {"type", "code", "message", "param"}
        if param is not None:
            assert error["error"]["param"] == param
        events = create(ws, model=CHATML, input="ok", max_output_tokens=2)
        assert events[-1]["type"] in FINAL[:2]


def test_an_unauthenticated_upgrade_is_refused(sf_start_standalone):
    server = sf_start_standalone("--api-key=sk-good")
    for key in (None, "sk-bad"):
        with pytest.raises(InvalidStatus) as info:
            open_ws(server, key)
        assert info.value.response.status_code == 401
    with open_ws(server, "sk-good") as ws:
        assert create(ws, model=CHATML, input="x", max_output_tokens=2)[-1]["type"] in FINAL


def test_limits_and_shutdown(sf_start_standalone, tmp_path: Path):
    server = sf_start_standalone("--ws-connections=1", "--ws-messages-per-second=2")
    ws = open_ws(server)
    with pytest.raises(InvalidStatus) as info:
        open_ws(server)  # one connection per key
    assert info.value.response.status_code == 429
    for _ in range(3):
        ws.send("{}")
    codes = [json.loads(ws.recv(timeout=30))["error"]["code"] for _ in range(3)]
    assert codes == ["invalid_request", "invalid_request", "rate_limit_exceeded"]
    server.stop()
    with pytest.raises(ConnectionClosed) as closed:
        ws.recv(timeout=30)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1001


async def test_websocket_mode_inside_jupyter(jp_fetch, jp_http_port, jp_base_url, jp_serverapp):
    url = f"ws://localhost:{jp_http_port}{jp_base_url}v1/responses"
    with pytest.raises(InvalidStatus) as info:
        await aconnect(url, open_timeout=30)
    assert info.value.response.status_code == 401
    token = jp_serverapp.identity_provider.token
    headers = {"Authorization": f"Bearer {token}"}
    async with aconnect(url, additional_headers=headers, open_timeout=30) as ws:
        for n in range(2):
            await ws.send(
                json.dumps(
                    {
                        "type": "response.create",
                        "model": CHATML,
                        "input": f"x{n}",
                        "max_output_tokens": 3,
                    }
                )
            )
            events = []
            while not events or events[-1]["type"] not in FINAL:
                events.append(json.loads(await ws.recv()))
            assert [e["sequence_number"] for e in events] == list(range(len(events)))

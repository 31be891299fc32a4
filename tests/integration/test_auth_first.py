"""Authentication comes before anything else, on every POST route of every protocol.

An unauthenticated request (no key, a wrong key, another scheme) with a malformed
body, a bad ``LMSP-Version``, an oversized body or odd headers gets the same 401
in its protocol's own error shape as an empty request would: nothing in the answer
depends on the body or the other headers. Standalone here; inside Jupyter too.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from tornado.httpclient import HTTPClientError

from jupyter_superfluid.pytest_plugin import StandaloneServer, start_standalone

KEY = "sk-right"
LIMIT = 4096  # the server's body limit here: a bigger body is over it
SEED = 20261202
BEARER_WRONG = {"Authorization": "Bearer wrong"}
PER_ROUTE = 60
POST_ROUTES = [
    "/v1/chat/completions",
    "/v1/responses",
    "/v1/responses/input_tokens",
    "/v1/responses/resp_x/cancel",
    "/lmsp/v1/responses",
    "/lmsp/v1/tasks",
    "/lmsp/v1/tasks/task_x/cancel",
    "/superfluid/v1/models",
    "/superfluid/v1/models/nope/load",
    "/superfluid/v1/models/nope/unload",
]
BODIES: list[bytes] = [
    b"",
    b"{",
    b"[1, 2]",
    b"\xff\xfe\x00",
    b'{"model": NaN, "input": "x"}',
    b'{"input": "\\ud800"}',
    b"[" * 5000 + b"]" * 5000,
    b"{}",
    json.dumps({"model": 5, "input": [{"type": 5}], "messages": {}}).encode(),
    json.dumps({"spec": [], "load": "yes"}).encode(),
    json.dumps({"x": "y" * (2 * LIMIT)}).encode(),  # over the body limit
]
CREDENTIALS = ["", "Bearer wrong", "Bearer", "Basic eA==", "token wrong", "Bearer sk-righ"]
OTHER_HEADERS: list[tuple[str, list[str]]] = [
    ("LMSP-Version", ["1.0", "2", "", "x" * 300]),
    ("Idempotency-Key", ["k1", "", "a b", "k" * 300]),
    ("Content-Type", ["application/json", "text/plain", "x", "multipart/form-data"]),
]


def requests(seed: int) -> Iterator[tuple[str, bytes, dict[str, str]]]:
    """Seeded (path, body, headers) without a valid key, PER_ROUTE per POST route."""
    rng = random.Random(seed)
    for path in POST_ROUTES:
        for _ in range(PER_ROUTE):
            headers = {k: rng.choice(vs) for k, vs in OTHER_HEADERS if rng.random() < 0.5}
            credential = rng.choice(CREDENTIALS)
            if credential:
                headers["Authorization"] = credential
            yield path, rng.choice(BODIES), headers


def error_of(path: str, doc: dict[str, Any]) -> tuple[str, str]:
    """The code and message of an error in ``path``'s protocol shape."""
    if path.startswith("/lmsp"):
        assert doc["type"].endswith("unauthorized") or doc["status"] == 401, doc
        return doc["code"], doc["detail"]
    return doc["error"]["code"], doc["error"]["message"]


@pytest.fixture(scope="module")
def keyed(sf_model_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A server with one key and a small body limit."""
    work = tmp_path_factory.mktemp("auth-first")
    args = (f"--api-key={KEY}", f"--Superfluid.max_request_bytes={LIMIT}")
    server: StandaloneServer = start_standalone(sf_model_cache, work, *args)
    yield server.url
    server.stop()


def test_unauthenticated_requests_are_401_before_the_body_is_read(keyed):
    with httpx.Client(base_url=keyed, timeout=30) as http:
        plain = {path: http.post(path) for path in POST_ROUTES}
        for path, r in plain.items():
            assert r.status_code == 401, (path, r.text)
            assert error_of(path, r.json())[0] in ("invalid_api_key", "unauthorized"), r.text
        for n, (path, body, headers) in enumerate(requests(SEED)):
            r = http.post(path, content=body, headers=headers)
            assert r.status_code == 401, (n, path, body[:80], headers, r.text)
            assert r.json() == plain[path].json(), (n, path, body[:80], headers)
            assert r.headers["www-authenticate"].startswith("Bearer")
        right = http.post("/v1/responses", content=b"{", headers={"Authorization": f"Bearer {KEY}"})
        assert right.status_code == 400  # with the key, the body is judged


async def test_inside_jupyter_too(jp_fetch):
    answers: dict[str, dict[str, Any]] = {}
    for n, (path, body, headers) in enumerate(requests(SEED + 1)):
        if n % 3:
            continue  # a third of them: a Jupyter server is slower to start per test
        headers.setdefault("Authorization", "")
        with pytest.raises(HTTPClientError) as info:
            await jp_fetch(*path.strip("/").split("/"), method="POST", body=body, headers=headers)
        doc = json.loads(info.value.response.body)
        assert info.value.code == 401, (n, path, body[:80], headers, doc)
        assert error_of(path, doc)[0] in ("invalid_api_key", "unauthorized"), doc
        assert answers.setdefault(path, doc) == doc, (n, path, body[:80], headers)
    assert set(answers) == set(POST_ROUTES)


async def test_a_wrong_key_beside_jupyters_login_cookie_is_a_401(
    jp_fetch, jp_serverapp, jp_base_url, jp_http_port
):
    # The openai SDK keeps the login cookie Jupyter set on a token-authenticated answer;
    # a later request with a wrong key is refused as a wrong key, not for its missing XSRF.
    root = f"http://localhost:{jp_http_port}{jp_base_url}"
    token = jp_serverapp.identity_provider.token
    body = {"model": "superfluid/tiny-chatml", "input": "hi", "max_output_tokens": 2}
    async with httpx.AsyncClient(timeout=60) as http:
        right = openai.AsyncOpenAI(base_url=root + "v1", api_key=token, http_client=http)
        wrong = openai.AsyncOpenAI(base_url=root + "v1", api_key="wrong", http_client=http)
        assert [m.id async for m in right.models.list()]
        assert any(c.name.startswith("username-") for c in http.cookies.jar)  # the login cookie
        with pytest.raises(openai.AuthenticationError) as info:
            await wrong.responses.create(**body)
        assert info.value.status_code == 401 and info.value.code == "invalid_api_key"
        raw = await http.post(root + "v1/responses", json=body, headers=BEARER_WRONG)
        assert raw.status_code == 401 and raw.json()["error"]["code"] == "invalid_api_key"
        listed = await http.get(root + "v1/models", headers=BEARER_WRONG)
        assert listed.status_code == 401
        made = await right.responses.create(**body)
        assert made.status == "incomplete" or made.status == "completed"
        ok = await http.post(
            root + "v1/responses", json=body, headers={"Authorization": f"Bearer {token}"}
        )
        assert ok.status_code == 200, ok.text

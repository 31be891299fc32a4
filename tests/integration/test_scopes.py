"""Every route of both protocols enforces its scope, for every key-policy scope."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from jupyter_superfluid.pytest_plugin import StandaloneServer, start_standalone
from jupyter_superfluid.web.auth import ALL_SCOPES

CHATML = "superfluid/tiny-chatml"
# One key per scope, and one holding none of them (tools:execute is reserved).
KEYS = {scope: f"sk-{scope.replace(':', '-')}" for scope in sorted(ALL_SCOPES | {"tools:execute"})}
ROUTES = [
    ("GET", "/v1/models", "models:read"),
    ("GET", f"/v1/models/{CHATML}", "models:read"),
    ("POST", "/v1/chat/completions", "responses:write"),
    ("POST", "/v1/completions", "responses:write"),
    ("POST", "/v1/responses", "responses:write"),
    ("POST", "/v1/responses/input_tokens", "responses:read"),
    ("POST", "/v1/responses/compact", "responses:write"),
    ("GET", "/v1/responses", "responses:read"),
    ("GET", "/v1/responses/resp_x", "responses:read"),
    ("DELETE", "/v1/responses/resp_x", "responses:write"),
    ("GET", "/v1/responses/resp_x/input_items", "responses:read"),
    ("POST", "/v1/responses/resp_x/cancel", "responses:write"),
    ("GET", "/lmsp/v1/models", "models:read"),
    ("GET", f"/lmsp/v1/models/{CHATML}", "models:read"),
    ("POST", "/lmsp/v1/responses", "responses:write"),
    ("GET", "/lmsp/v1/responses/resp_x", "responses:read"),
    ("POST", "/lmsp/v1/tasks", "tasks:write"),
    ("GET", "/lmsp/v1/tasks/task_x", "tasks:read"),
    ("GET", "/lmsp/v1/tasks/task_x/events", "tasks:read"),
    ("POST", "/lmsp/v1/tasks/task_x/cancel", "tasks:write"),
    ("GET", "/superfluid/v1/models", "models:read"),
    ("GET", f"/superfluid/v1/models/{CHATML}", "models:read"),
    ("POST", "/superfluid/v1/models", "models:write"),
    ("POST", "/superfluid/v1/models/nope/load", "models:write"),
    ("POST", "/superfluid/v1/models/nope/unload", "models:write"),
    ("DELETE", "/superfluid/v1/models/nope", "models:write"),
]
OPEN_ROUTES = [("GET", "/lmsp/v1"), ("GET", "/v1/openapi.json")]


@pytest.fixture(scope="module")
def scoped(sf_model_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A server whose key policy gives each key exactly one scope."""
    work = tmp_path_factory.mktemp("scoped")
    policy = work / "keys.json"
    keys = [{"name": s, "key": k, "scopes": [s]} for s, k in KEYS.items()]
    policy.write_text(json.dumps({"keys": keys}))
    server: StandaloneServer = start_standalone(sf_model_cache, work, f"--key-policy={policy}")
    yield server.url
    server.stop()


@pytest.mark.parametrize("scope", sorted(KEYS))
@pytest.mark.parametrize(("method", "path", "needed"), ROUTES)
def test_each_route_needs_its_scope(scoped, method, path, needed, scope):
    # An empty body is refused (400) after the scope check, so nothing generates.
    body = b"{}" if method == "POST" else None
    headers = {"Authorization": f"Bearer {KEYS[scope]}"}
    r = httpx.request(method, scoped + path, content=body, headers=headers, timeout=30)
    if scope == needed:
        assert r.status_code != 403 and r.status_code < 500, r.text
        return
    assert r.status_code == 403, r.text
    doc = r.json()
    code = doc["code"] if path.startswith("/lmsp") else doc["error"]["code"]
    detail = doc["detail"] if path.startswith("/lmsp") else doc["error"]["message"]
    assert code == "insufficient_scope" and needed in detail


@pytest.mark.parametrize(("method", "path"), OPEN_ROUTES)
def test_discovery_documents_need_no_scope(scoped, method, path):
    headers = {"Authorization": f"Bearer {KEYS['tools:execute']}"}
    assert httpx.request(method, scoped + path, headers=headers, timeout=30).status_code == 200


def test_a_reader_cannot_create_stream_or_delete(scoped):
    reader = {"Authorization": f"Bearer {KEYS['responses:read']}"}
    writer = {"Authorization": f"Bearer {KEYS['responses:write']}"}
    body = {"model": CHATML, "input": "x", "max_output_tokens": 2}
    made = httpx.post(scoped + "/v1/responses", json=body, headers=writer, timeout=60)
    assert made.status_code == 200
    rid = made.json()["id"]
    for method, path, payload in [
        ("POST", "/v1/responses", body),
        ("POST", "/v1/responses", {**body, "stream": True}),
        ("POST", "/v1/chat/completions", {"model": CHATML, "messages": []}),
        ("DELETE", f"/v1/responses/{rid}", None),
    ]:
        r = httpx.request(method, scoped + path, json=payload, headers=reader, timeout=30)
        assert r.status_code == 403 and r.json()["error"]["code"] == "insufficient_scope"
    # The writer may delete what it made, but not read it back.
    assert httpx.get(f"{scoped}/v1/responses/{rid}", headers=writer).status_code == 403
    assert httpx.delete(f"{scoped}/v1/responses/{rid}", headers=writer).status_code == 200


def test_managing_models_is_granted_by_name_only(sf_model_cache: Path, tmp_path: Path) -> None:
    """A policy key that lists no scopes holds every scope but models:write."""
    policy = tmp_path / "keys.json"
    keys = [{"name": "plain", "key": "sk-plain"}, {"name": "admin", "key": "sk-admin"}]
    keys[1]["scopes"] = ["models:read", "models:write"]  # type: ignore[assignment]
    policy.write_text(json.dumps({"keys": keys}))
    server = start_standalone(sf_model_cache, tmp_path, f"--key-policy={policy}")
    try:
        url = server.url + "/superfluid/v1/models"
        plain, admin = ({"Authorization": f"Bearer {k}"} for k in ("sk-plain", "sk-admin"))
        assert httpx.get(url, headers=plain, timeout=30).status_code == 200
        body = {"spec": "extra=superfluid/tiny-qwen3"}
        refused = httpx.post(url, json=body, headers=plain, timeout=30)
        assert refused.status_code == 403
        assert refused.json()["error"]["code"] == "insufficient_scope"
        assert "models:write" in refused.json()["error"]["message"]
        assert httpx.post(url, json=body, headers=admin, timeout=30).status_code == 201
        anyone = httpx.get(url, timeout=30)
        assert anyone.status_code == 401  # keys are configured: no key, no access
    finally:
        server.stop()

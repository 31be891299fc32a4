"""The models API inside a real Jupyter server: under its base URL, for the Jupyter user."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from tornado.httpclient import HTTPClientError

QWEN = "superfluid/tiny-qwen3"


async def _states(client: httpx.AsyncClient, url: str, model: str, until: str) -> list[str]:
    """The states ``model`` goes through on the event stream, until ``until``."""
    seen: list[str] = []
    async with client.stream("GET", url, params={"model": model}) as response:
        assert response.status_code == 200
        data: dict[str, Any] | None = None
        async for line in response.aiter_lines():
            if line.startswith("data: "):
                data = json.loads(line[len("data: ") :])
            if line or data is None:
                continue
            state = (data.get("model") or {}).get("state")
            data = None
            if state is not None and (not seen or seen[-1] != state):
                seen.append(state)
            if state == until:
                return seen
    raise AssertionError(f"the stream ended at {seen}")


async def test_the_jupyter_user_adds_loads_and_removes_a_model(
    jp_fetch: Any, jp_http_port: int, jp_base_url: str, jp_serverapp: Any
) -> None:
    added = await jp_fetch(
        "superfluid",
        "v1",
        "models",
        method="POST",
        body=json.dumps({"spec": f"extra={QWEN}", "load": True}),
    )
    assert added.code == 201 and json.loads(added.body)["id"] == "extra"
    root = f"http://localhost:{jp_http_port}{jp_base_url}"
    token = jp_serverapp.identity_provider.token
    async with httpx.AsyncClient(
        headers={"Authorization": f"token {token}"}, timeout=120
    ) as client:
        seen = await _states(client, root + "superfluid/v1/models/events", "extra", "loaded")
        assert seen[-1] == "loaded"
        listed = (await client.get(root + "v1/models/extra")).json()
        assert (
            listed["superfluid"]["state"] == "loaded" and listed["superfluid"]["origin"] == "added"
        )
    removed = await jp_fetch("superfluid", "v1", "models", "extra", method="DELETE")
    assert json.loads(removed.body)["deleted"] is True
    with pytest.raises(HTTPClientError) as info:
        await jp_fetch("superfluid", "v1", "models", "extra")
    assert info.value.code == 404

"""The extension inside a real Jupyter server: base URL, Jupyter auth, the SDK, responsiveness."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import openai
import pytest
from support.no_eos import NO_EOS_WIRE
from tornado.httpclient import HTTPClientError


def jupyter_url(port: int, base_url: str) -> str:
    return f"http://localhost:{port}{base_url}"


def sdk(port, base_url, token, **kw):
    return openai.AsyncOpenAI(
        base_url=jupyter_url(port, base_url) + "v1", api_key=token, max_retries=0, timeout=120, **kw
    )


def test_pip_install_enables_the_extension():
    jupyter = Path(sys.executable).with_name("jupyter")
    env = {k: v for k, v in os.environ.items() if not k.startswith("JUPYTER_CONFIG")}
    out = subprocess.run(
        [str(jupyter), "server", "extension", "list"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    text = out.stdout + out.stderr
    assert "jupyter_superfluid" in text and "enabled" in text.split("jupyter_superfluid")[1]


async def test_routes_live_under_the_base_url(jp_fetch, jp_base_url):
    assert jp_base_url == "/a%40b/"  # pytest-jupyter's default catches hard-coded paths
    r = await jp_fetch("v1", "models")
    ids = [m["id"] for m in json.loads(r.body)["data"]]
    assert ids == ["superfluid/tiny-chatml", "superfluid/tiny-qwen3"]


@pytest.mark.parametrize("auth", ["", "Bearer wrong-token", "token wrong", "Basic eA=="])
async def test_missing_or_wrong_key_is_an_openai_401(jp_fetch, auth):
    for path, method, body in [
        (("v1", "models"), "GET", None),
        (("v1", "chat", "completions"), "POST", "{}"),
        (("v1", "responses"), "POST", "{}"),
        (("v1", "responses", "resp_x"), "DELETE", None),
    ]:
        with pytest.raises(HTTPClientError) as info:
            await jp_fetch(*path, method=method, body=body, headers={"Authorization": auth})
        assert info.value.code == 401, path
        err = json.loads(info.value.response.body)["error"]
        assert (err["code"], err["type"]) == ("invalid_api_key", "authentication_error")
        assert "Jupyter server's token" in err["message"]


async def test_openai_sdk_with_the_jupyter_token(jp_fetch, jp_http_port, jp_base_url, jp_serverapp):
    client = sdk(jp_http_port, jp_base_url, jp_serverapp.identity_provider.token)
    models = [m.id async for m in client.models.list()]
    assert "superfluid/tiny-qwen3" in models
    out = await client.chat.completions.create(
        model="superfluid/tiny-chatml",
        messages=[{"role": "user", "content": "hi"}],
        max_tokens=5,
        seed=1,
        logit_bias=NO_EOS_WIRE,
    )
    assert out.choices[0].finish_reason == "length" and out.usage.completion_tokens == 5
    stream = await client.chat.completions.create(
        model="superfluid/tiny-chatml",
        messages=[{"role": "user", "content": "hi"}],
        max_tokens=5,
        seed=1,
        logit_bias=NO_EOS_WIRE,
        stream=True,
    )
    text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
    assert text == out.choices[0].message.content


async def test_superfluid_api_key_is_accepted_too(
    jp_fetch, jp_http_port, jp_base_url, jp_serverapp
):
    # The key is configured on the running app's access: keys are read per request.
    from jupyter_superfluid.web.auth import KeyRing

    app = jp_serverapp.extension_manager.extension_apps["jupyter_superfluid"]
    next(iter(app)).composition.access.keys = KeyRing(["sk-superfluid-test"])
    client = sdk(jp_http_port, jp_base_url, "sk-superfluid-test")
    out = await client.chat.completions.create(
        model="superfluid/tiny-chatml", messages=[{"role": "user", "content": "k"}], max_tokens=3
    )
    assert out.choices[0].message.role == "assistant"
    bad = sdk(jp_http_port, jp_base_url, "sk-wrong")
    with pytest.raises(openai.AuthenticationError):
        await bad.models.list()


async def test_jupyter_answers_while_a_model_generates(
    jp_fetch, jp_http_port, jp_base_url, jp_serverapp
):
    client = sdk(jp_http_port, jp_base_url, jp_serverapp.identity_provider.token)
    seen_during = 0
    # Banning the end-of-turn token forces a long answer, so the stream is surely open below.
    stream = await client.chat.completions.create(
        model="superfluid/tiny-chatml",
        messages=[{"role": "user", "content": "long"}],
        max_tokens=1500,
        temperature=1.0,
        seed=3,
        stream=True,
        logit_bias=NO_EOS_WIRE,
    )
    chunks = 0
    async for chunk in stream:
        chunks += 1
        if chunks % 100 == 0:
            r = await jp_fetch("api", "status")
            assert r.code == 200
            seen_during += 1
        if chunk.choices and chunk.choices[0].finish_reason:
            break
    assert seen_during >= 3  # the server answered /api/status mid-generation, repeatedly


async def test_responses_api_inside_jupyter(jp_fetch, jp_http_port, jp_base_url, jp_serverapp):
    client = sdk(jp_http_port, jp_base_url, jp_serverapp.identity_provider.token)
    first = await client.responses.create(
        model="superfluid/tiny-chatml", input="Hi", max_output_tokens=30, extra_body={"seed": 1}
    )
    second = await client.responses.create(
        previous_response_id=first.id, input="Again", max_output_tokens=5
    )
    assert second.model == first.model and second.previous_response_id == first.id
    assert (await client.responses.retrieve(second.id)).id == second.id
    events = [
        e.type
        async for e in await client.responses.create(
            model="superfluid/tiny-qwen3", input="s", max_output_tokens=5, stream=True
        )
    ]
    assert events[0] == "response.created" and events[-1] in (
        "response.completed",
        "response.incomplete",
    )
    items = await client.responses.input_items.list(second.id)
    assert [i.type for i in items.data] == ["message"]
    await client.responses.delete(second.id)
    with pytest.raises(openai.NotFoundError):
        await client.responses.retrieve(second.id)
    with pytest.raises(openai.BadRequestError) as info:
        await client.responses.create(
            model="superfluid/tiny-chatml", input="x", tools=[{"type": "web_search"}]
        )
    assert info.value.code == "unsupported_tool"


async def test_browser_requests_with_cookie_and_xsrf(
    jp_fetch, jp_serverapp, jp_base_url, jp_http_port
):
    # A browser logs in (the token in the URL sets Jupyter's login cookie) and sends
    # its XSRF token with POSTs; without the token a POST is refused, without the
    # login cookie it is not authenticated at all.
    import httpx

    root = jupyter_url(jp_http_port, jp_base_url)
    body = {"model": "superfluid/tiny-chatml", "messages": [{"role": "user", "content": "b"}]}
    body["max_tokens"] = 2
    url = root + "v1/chat/completions"
    async with httpx.AsyncClient() as browser:
        token = jp_serverapp.identity_provider.token
        assert (await browser.get(root + "api/status", params={"token": token})).status_code == 200
        browser.cookies.set("_xsrf", "abc")
        assert (await browser.get(root + "v1/models")).status_code == 200
        ok = await browser.post(url, json=body, headers={"X-XSRFToken": "abc"})
        assert ok.status_code == 200, ok.text
        assert ok.json()["object"] == "chat.completion"
        refused = await browser.post(url, json=body)
        assert refused.status_code == 403
        assert refused.json()["error"]["code"] == "forbidden"
    async with httpx.AsyncClient(cookies={"_xsrf": "abc"}) as stranger:
        r = await stranger.post(url, json=body, headers={"X-XSRFToken": "abc"})
    assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key"


async def test_sync_sdk_against_jupyter(jp_fetch, jp_http_port, jp_base_url, jp_serverapp):
    # The sync client blocks, so it runs in a thread while the server runs on this loop.
    def call():
        client = openai.OpenAI(
            base_url=jupyter_url(jp_http_port, jp_base_url) + "v1",
            api_key=jp_serverapp.identity_provider.token,
            max_retries=0,
        )
        ids = [m.id for m in client.models.list()]
        out = client.chat.completions.create(
            model=ids[0],
            max_tokens=4,
            messages=[{"role": "user", "content": "s"}],
            seed=2,
            logit_bias=NO_EOS_WIRE,
        )
        return ids, out

    ids, out = await asyncio.to_thread(call)
    assert ids == ["superfluid/tiny-chatml", "superfluid/tiny-qwen3"]
    assert out.usage.completion_tokens == 4

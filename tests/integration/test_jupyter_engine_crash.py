"""Inside a real Jupyter server the engine process crashes and restarts; Jupyter never notices."""

from __future__ import annotations

import asyncio
import json
import os
import signal

import openai
import pytest
from support.engine_processes import engine_children, is_running
from support.no_eos import RUN_TO_CAP

CHATML = "superfluid/tiny-chatml"
JUPYTER_APIS = (("api", "status"), ("api", "contents"), ("api", "kernels"))


async def test_jupyter_answers_through_an_engine_crash_and_restart(
    jp_fetch, jp_http_port, jp_base_url, jp_serverapp
):
    client = openai.AsyncOpenAI(
        base_url=f"http://localhost:{jp_http_port}{jp_base_url}v1",
        api_key=jp_serverapp.identity_provider.token,
        max_retries=0,
        timeout=120,
    )

    async def engine() -> dict:
        r = await jp_fetch("v1", "models", CHATML)
        return json.loads(r.body)["superfluid"]

    await client.responses.create(model=CHATML, input="hi", max_output_tokens=2)  # loads it
    pid = (await engine())["engine_pid"]
    assert pid in engine_children()  # the Jupyter server's child, not the server itself
    samples: list[tuple[str, list[int]]] = []  # (engine state, Jupyter's answers)
    stop = asyncio.Event()

    async def poll_jupyter() -> None:
        while not stop.is_set():
            state = (await engine())["engine_state"]
            codes = [(await jp_fetch(*path)).code for path in JUPYTER_APIS]
            samples.append((state, codes))
            await asyncio.sleep(0.005)

    poller = asyncio.ensure_future(poll_jupyter())
    stream = await client.responses.create(
        model=CHATML,
        input="go",
        stream=True,
        max_output_tokens=1500,
        extra_body=RUN_TO_CAP,
    )
    events = []
    # The stream's error event carries OpenResponses' error payload, so the SDK raises it.
    with pytest.raises(openai.APIError) as crashed:
        async for event in stream:
            events.append(event)
            if event.type == "response.output_text.delta" and len(events) == 8:
                os.kill(pid, signal.SIGKILL)
    after = await client.responses.create(
        model=CHATML, input="again", max_output_tokens=3, extra_body=RUN_TO_CAP
    )
    stop.set()
    await poller
    assert events[0].type == "response.created" and len(events) >= 8
    assert crashed.value.code == "engine_crashed" and "SIGKILL" in crashed.value.message
    assert after.status == "incomplete" and after.usage.output_tokens == 3
    assert not is_running(pid) and (await engine())["engine_pid"] in engine_children()
    assert all(codes == [200, 200, 200] for _, codes in samples)
    assert any(state == "restarting" for state, _ in samples)  # answered while it was down

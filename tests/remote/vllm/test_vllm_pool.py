"""A pool of two real vLLMs behind one model id (``ID=vllm:URL,URL#tokenizer=PATH``).

The session's vLLM and a second one started here serve the same tiny model. Which
replica served a turn is read from superfluid's ``/v1/models/q`` and from each vLLM's own
``/metrics``; warmth is vLLM's own count (``cached_tokens``, whole blocks).
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.vllm_remote import VllmServer

from jupyter_superfluid.pytest_plugin import StandaloneServer, free_port, start_standalone

from .test_vllm import LONG, delta

Pool = tuple[StandaloneServer, list[VllmServer]]


@pytest.fixture(scope="module")
def second_vllm(
    vllm_server: VllmServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[VllmServer]:
    """Another vLLM on the session's model (started here: tens of seconds)."""
    log = tmp_path_factory.mktemp("vllm-second") / "vllm.log"
    server = VllmServer(vllm_server.python, vllm_server.model, free_port(), log).start()
    yield server
    server.stop()


@pytest.fixture
def pool(
    sf_model_cache: Path, tmp_path: Path, vllm_server: VllmServer, second_vllm: VllmServer
) -> Iterator[Pool]:
    """A superfluid serving both vLLMs as ``q``."""
    remotes = [vllm_server, second_vllm]
    spec = f"q=vllm:{','.join(r.url for r in remotes)}#tokenizer={vllm_server.model}"
    server = start_standalone(sf_model_cache, tmp_path, models=(spec,))
    yield server, remotes
    server.stop()


def replicas(server: StandaloneServer) -> dict[str, dict[str, Any]]:
    """The pool's replicas as ``/v1/models/q`` shows them, by URL."""
    model = httpx.get(server.base_url + "/models/q", timeout=30).json()
    return {r["url"]: r for r in model["superfluid"]["replicas"]}


def turn(server: StandaloneServer, text: str, previous: dict | None = None) -> dict[str, Any]:
    """One stored turn of 4 tokens (continuing ``previous``), as JSON."""
    body: dict[str, Any] = {"model": "q", "input": text, "max_output_tokens": 4}
    body |= {"reasoning": {"effort": "none"}, "temperature": 0}
    if previous is not None:
        body["previous_response_id"] = previous["id"]
    answer = httpx.post(server.base_url + "/responses", json=body, timeout=120)
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def cached(response: dict[str, Any]) -> int:
    return int(response["usage"]["input_tokens_details"]["cached_tokens"])


def test_a_conversation_stays_on_its_vllm_warm_and_fails_over_to_the_other(
    pool: Pool, vllm_server: VllmServer
) -> None:
    server, remotes = pool
    first = turn(server, LONG)
    (home_url,) = [url for url, r in replicas(server).items() if r["conversations"] == 1]
    home, other = sorted(remotes, key=lambda r: r.url != home_url)
    before = other.wait_idle()
    second = turn(server, "And in spring?", first)
    # The replica holding the conversation served it, warm by vLLM's count; the other
    # generated nothing.
    assert cached(second) >= 32 * (first["usage"]["input_tokens"] // 32) > 0
    assert delta(before, other.wait_idle(), "generation_tokens_total") == 0
    home.stop(signal.SIGKILL)
    try:
        # The survivor serves the next turn, cold (it never saw the conversation) ...
        third = turn(server, "And in summer?", second)
        assert cached(third) < second["usage"]["input_tokens"] // 2
        shown = replicas(server)
        assert shown[home.url]["health"] == "down" and home.url in shown[home.url]["last_error"]
        assert shown[other.url]["conversations"] == 1
        # ... and warm from then on.
        fourth = turn(server, "And in autumn?", third)
        assert cached(fourth) >= 32 * (third["usage"]["input_tokens"] // 32) > 0
    finally:
        if home is vllm_server:
            home.start()  # the session's vLLM, for the tests after this one

"""Superfluid over a real vLLM (``ID=vllm:URL#tokenizer=PATH``) through its protocols.

One vLLM server (CPU, a 3M-parameter random Llama) serves the session; a standalone
superfluid with a key policy of two keys talks to it. What vLLM did is read from its own
``/metrics``. The test that kills and restarts vLLM runs last (a restart costs tens of
seconds).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import signal
import socket
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import openai
import pytest
from support.vllm_remote import BLOCK, VllmServer

from jupyter_superfluid.engine.base import EngineError, GenerateRequest, SamplingParams
from jupyter_superfluid.engine.remote.vllm import VllmEngine
from jupyter_superfluid.pytest_plugin import StandaloneServer

from .. import checks
from .conftest import KEYS, over_vllm

# Long enough to fill several of vLLM's 32-token blocks.
LONG = "Tell me about the weather in Paris and Oslo in the winter months, in detail. " * 4


def client_for(server: StandaloneServer, who: str = "alice") -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key=KEYS[who], max_retries=0, timeout=120)


def no_eos(remote: VllmServer) -> dict[str, int]:
    """The logit bias that bans the model's end of turn."""
    body = {"prompt": "<|im_end|>", "add_special_tokens": False}
    ids = httpx.post(remote.url + "/tokenize", json=body, timeout=10).json()["tokens"]
    return {str(ids[0]): -100}


def delta(before: dict[str, float], after: dict[str, float], name: str) -> int:
    return int(after.get(name, 0) - before.get(name, 0))


def test_create_is_generated_by_vllm(superfluid_vllm, vllm_server: VllmServer):
    before = vllm_server.wait_idle()
    r = client_for(superfluid_vllm).responses.create(
        model="q",
        input="hello",
        max_output_tokens=16,
        reasoning={"effort": "none"},
        extra_body={"seed": 3, "logit_bias": no_eos(vllm_server)},
    )
    after = vllm_server.wait_idle()
    assert r.model == "q" and r.status == "incomplete"
    assert r.usage.output_tokens == 16 == delta(before, after, "generation_tokens_total")
    assert r.usage.input_tokens == delta(before, after, "prompt_tokens_total")


def test_stream_events_add_up_to_the_stored_response(superfluid_vllm):
    checks.stream_adds_up_to_the_stored_response(client_for(superfluid_vllm), "q")


def test_forced_tool_call(superfluid_vllm):
    checks.forced_tool_call(client_for(superfluid_vllm), "q")


def test_json_schema_output(superfluid_vllm):
    checks.json_schema_output(client_for(superfluid_vllm), "q", reasoning={"effort": "none"})


def test_chat_completions_once(superfluid_vllm):
    chat = client_for(superfluid_vllm).chat.completions.create(
        model="q", messages=[{"role": "user", "content": "hi"}], max_tokens=12, seed=2
    )
    assert chat.choices[0].finish_reason in ("stop", "length")
    assert chat.usage.completion_tokens <= 12


def test_continuation_is_served_warm_by_vllm(superfluid_vllm, vllm_server: VllmServer):
    client = client_for(superfluid_vllm)
    first = client.responses.create(
        model="q", input=LONG, max_output_tokens=8, reasoning={"effort": "none"}
    )
    raw = client.responses.with_raw_response.create(
        model="q", previous_response_id=first.id, input="And?", max_output_tokens=8
    )
    second = raw.parse()
    cached = second.usage.input_tokens_details.cached_tokens
    # vLLM's own count, in whole blocks, covering the first turn's prompt.
    assert int(raw.headers["x-superfluid-warm"]) == cached
    assert cached % BLOCK == 0 and cached >= first.usage.input_tokens // BLOCK * BLOCK > 0


def test_cache_salt_isolates_principals(superfluid_vllm, vllm_server: VllmServer):
    prompt = "A secret shared by nobody else: " + "plum " * 60
    alice = client_for(superfluid_vllm, "alice")
    bob = client_for(superfluid_vllm, "bob")
    kwargs = {"model": "q", "input": prompt, "max_output_tokens": 2, "store": False}
    cold = alice.responses.create(**kwargs)
    warm = alice.responses.create(**kwargs)
    other = bob.responses.create(**kwargs)
    assert cold.usage.input_tokens_details.cached_tokens == 0
    assert warm.usage.input_tokens_details.cached_tokens >= BLOCK  # alice's own prefix
    assert other.usage.input_tokens_details.cached_tokens == 0  # never alice's blocks
    again = bob.responses.create(**kwargs)
    assert again.usage.input_tokens_details.cached_tokens >= BLOCK


def completions_cached(server: StandaloneServer, who: str, prompt: str) -> int:
    """The cached tokens of a ``/v1/completions`` request under ``who``'s key."""
    body = {"model": "q", "prompt": prompt, "max_tokens": 2}
    headers = {"Authorization": f"Bearer {KEYS[who]}"}
    r = httpx.post(server.base_url + "/completions", json=body, headers=headers, timeout=60)
    assert r.status_code == 200, r.text
    return int(r.json()["usage"]["prompt_tokens_details"]["cached_tokens"])


def test_cache_salt_isolates_legacy_completions(superfluid_vllm):
    prompt = "Another secret of alice's: " + "pear " * 60
    assert completions_cached(superfluid_vllm, "alice", prompt) == 0
    assert completions_cached(superfluid_vllm, "alice", prompt) >= BLOCK
    assert completions_cached(superfluid_vllm, "bob", prompt) == 0


def _leave_once_vllm_has_it(server: StandaloneServer, vllm: VllmServer, body: dict) -> None:
    """Post ``body`` to superfluid's streaming Responses; leave once vLLM has the request.

    vLLM's engine is paused throughout, so it cannot finish the answer before its API
    server has seen superfluid's stream close, however starved the machine (on a loaded
    one, unpaused, it had generated every token before the first reached the client). The
    client sends raw HTTP: it leaves without waiting for the headers, which superfluid
    sends with the remote's first chunk.
    """
    url = urlsplit(server.base_url)
    payload = json.dumps(body).encode()
    head = (
        f"POST {url.path}/responses HTTP/1.1\r\nHost: {url.netloc}\r\n"
        f"Authorization: Bearer {KEYS['alice']}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(payload)}\r\n\r\n"
    ).encode()
    mark = vllm.log_size()
    with vllm.engine_paused(), socket.create_connection((url.hostname, url.port)) as sock:
        sock.sendall(head + payload)
        assert vllm.wait_logged("Received request cmpl-", since=mark)
        sock.close()  # superfluid sees the client go, and closes its stream from vLLM
        aborted = vllm.wait_logged("Aborted request", since=mark)
    assert aborted, "vLLM's API server did not abort the request after superfluid left"


def test_disconnect_makes_vllm_abort(superfluid_vllm, vllm_server: VllmServer):
    before = vllm_server.wait_idle()
    body = {
        "model": "q",
        "input": "go",
        "stream": True,
        "max_output_tokens": 3500,
        "logit_bias": no_eos(vllm_server),
        "reasoning": {"effort": "none"},  # else the answer is reasoning, and no text comes
    }
    _leave_once_vllm_has_it(superfluid_vllm, vllm_server, body)
    after = vllm_server.wait_idle()  # the engine resumed: it drops the request at once
    assert delta(before, after, "generation_tokens_total") < 3500


# Texts as the chat path tokenizes them: a rendered turn with its specials, a generation
# prompt, plain prose with digits and non-Latin text, and an empty one.
TEXTS = [
    "<|im_start|>user\nWhat is 2+2? Réponds en français, s'il te plaît.<|im_end|>\n",
    "<|im_start|>assistant\n<think>\n\n</think>\n\n",
    "def f(x):\n    return x ** 2  # 数学 🙂\n\n\n",
    "",
]


def tokenize_requests(engine: VllmEngine) -> list[str]:
    """The paths of the ``/tokenize`` requests the engine sends from now on."""
    sent: list[str] = []

    def seen(request: httpx.Request) -> None:
        if request.url.path == "/tokenize":
            sent.append(request.url.path)

    engine._client.event_hooks["request"].append(seen)
    return sent


def vllm_ids(remote: VllmServer, text: str) -> list[int]:
    body = {"prompt": text, "add_special_tokens": True}
    return httpx.post(remote.url + "/tokenize", json=body, timeout=30).json()["tokens"]


def test_prompt_texts_are_tokenized_here_with_vllms_own_ids(vllm_server: VllmServer):
    engine = VllmEngine.connect("q", vllm_server.url, tokenizer=vllm_server.model)
    try:
        assert engine.local_tokenizing  # the probe's ids were vLLM's
        sent = tokenize_requests(engine)
        ours = [engine.tokenize(text) for text in TEXTS]
        assert sent == []  # not one round trip
        assert ours == [vllm_ids(vllm_server, text) for text in TEXTS]
    finally:
        asyncio.run(engine.close())


def test_a_tokenizer_that_disagrees_with_vllm_falls_back_to_its_tokenize(
    vllm_server: VllmServer, tmp_path: Path
):
    other = shutil.copytree(vllm_server.model, tmp_path / "other-tokenizer")
    data = json.loads((other / "tokenizer.json").read_text())
    token = {"content": "Hello", "single_word": False, "lstrip": False, "rstrip": False}
    token |= {"id": len(data["model"]["vocab"]) + 100, "normalized": False, "special": False}
    data["added_tokens"].append(token)  # "Hello" is one token here, several in vLLM
    (other / "tokenizer.json").write_text(json.dumps(data))
    engine = VllmEngine.connect("q", vllm_server.url, tokenizer=other)
    try:
        assert not engine.local_tokenizing
        sent = tokenize_requests(engine)
        assert [engine.tokenize(text) for text in TEXTS] == [
            vllm_ids(vllm_server, text) for text in TEXTS
        ]
        assert len(sent) == len(TEXTS)
    finally:
        asyncio.run(engine.close())


def test_turns_reuse_one_pooled_connection_to_vllm(vllm_server: VllmServer):
    # A stream left unread at its end closes its connection (llama-server closes every
    # streamed one itself; vLLM keeps them alive), and each turn would open another.
    engine = VllmEngine.connect("q", vllm_server.url, tokenizer=vllm_server.model)
    request = GenerateRequest(tuple(engine.tokenize("hello")), SamplingParams(max_tokens=4))

    async def opened_and_idle_after_each_turn() -> list[tuple[int, int]]:
        seen = []
        for _ in range(2):
            events = [event async for event in engine.generate(request)]
            assert type(events[-1]).__name__ == "GenerationFinished"
            client = engine.async_client()
            seen.append((client.opened, client.idle))
        return seen

    try:
        assert asyncio.run(opened_and_idle_after_each_turn()) == [(1, 1), (1, 1)]
    finally:
        asyncio.run(engine.close())


def test_a_grammar_vllm_cannot_compile_is_its_refusal_before_any_event(vllm_server: VllmServer):
    engine = VllmEngine.connect("q", vllm_server.url, tokenizer=vllm_server.model)
    sampling = SamplingParams(max_tokens=4, grammar='root ::= undefined-rule "x"')
    request = GenerateRequest(tuple(engine.tokenize("hello")), sampling)

    async def first_event() -> object:
        return await anext(aiter(engine.generate(request)))

    try:
        with pytest.raises(EngineError) as caught:
            asyncio.run(first_event())
        assert type(caught.value) is EngineError  # refused, not unavailable nor overflow
        assert str(caught.value).startswith(f"vLLM at {vllm_server.url}")
        assert "Invalid grammar" in str(caught.value)  # vLLM's own message, passed on
    finally:
        asyncio.run(engine.close())


def test_a_schema_vllm_refuses_is_a_400_naming_the_field(superfluid_vllm):
    # An empty alternative: llama.cpp compiles its grammar (tests/chat), xgrammar does not.
    schema = {"type": "string", "pattern": "^(a|b|)c$"}
    text = {"format": {"type": "json_schema", "name": "abc", "schema": schema}}
    client = client_for(superfluid_vllm)
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="q", input="a", max_output_tokens=4, text=text)
    error = caught.value.body
    assert (error["type"], error["param"]) == ("invalid_request_error", "text.format.schema")
    assert "Invalid grammar" in error["message"]  # vLLM's own words, passed on
    assert client.responses.create(model="q", input="a", max_output_tokens=2).status  # still up


def test_no_tokenizer_is_refused_at_start(sf_model_cache: Path, tmp_path: Path, vllm_server):
    from jupyter_superfluid.models.registry import parse_spec

    with pytest.raises(ValueError, match="tokenizer=PATH"):
        parse_spec(f"q=vllm:{vllm_server.url}")
    empty = tmp_path / "no-template"
    empty.mkdir()
    (empty / "tokenizer_config.json").write_text("{}")
    server = over_vllm(
        sf_model_cache,
        tmp_path,
        VllmServer(vllm_server.python, empty, vllm_server.port, tmp_path / "x.log"),
    )
    try:
        with pytest.raises(openai.APIStatusError) as caught:
            openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0).responses.create(
                model="q", input="a", max_output_tokens=2
            )
        assert "no chat template" in caught.value.body["message"]
    finally:
        server.stop()


def test_zz_vllm_going_away_gives_503_then_recovers(superfluid_vllm, vllm_server: VllmServer):
    client = client_for(superfluid_vllm)
    assert client.responses.create(model="q", input="a", max_output_tokens=4).status
    vllm_server.stop(signal.SIGKILL)
    for stream in (False, True):
        with pytest.raises(openai.APIStatusError) as caught:
            client.responses.create(model="q", input="b", max_output_tokens=4, stream=stream)
        assert caught.value.status_code == 503
        assert caught.value.body["code"] == "engine_unavailable"
        assert vllm_server.url in caught.value.body["message"]
    vllm_server.start()  # the same port, a fresh (cold) vLLM
    again = client.responses.create(model="q", input="c", max_output_tokens=4)
    assert again.status in ("completed", "incomplete")

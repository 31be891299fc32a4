"""``LlamaServerEngine`` itself: specs, request bodies, and the seam against a real llama-server."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from support.no_eos import EOS_ID, NO_EOS

from jupyter_superfluid.builtin_models.tiny_gguf import ensure_builtin
from jupyter_superfluid.engine.base import (
    ContextOverflowError,
    EngineUnavailableError,
    GenerateRequest,
    GenerationFinished,
    MediaError,
    PromptEvaluated,
    SamplingParams,
    TokenGenerated,
)
from jupyter_superfluid.engine.local.llama import LlamaEngine
from jupyter_superfluid.engine.remote.llama_completion import (
    CompletionRelay,
    completion_body,
    remote_seed,
)
from jupyter_superfluid.engine.remote.llama_server import LlamaServerEngine
from jupyter_superfluid.engine.remote.pool import PoolEngine
from jupyter_superfluid.models.registry import ModelRegistry, parse_spec
from jupyter_superfluid.pytest_plugin import free_port

from .helpers import REMOTE_KEY, SLOT_CONTEXT, RemoteServer

CHATML = "superfluid/tiny-chatml"


def test_llama_server_specs() -> None:
    named = parse_spec("big=llama-server:http://gpu-box:8080/")
    assert (named.id, named.kind, named.source) == ("big", "llama-server", "http://gpu-box:8080")
    # Without ID=, the id is known at start without asking the remote: the URL minus scheme.
    plain = parse_spec("llama-server:https://llm.example.org/llama")
    assert (plain.id, plain.source) == ("llm.example.org/llama", "https://llm.example.org/llama")
    for bad in ("llama-server:gpu-box:8080", "llama-server:ftp://h", "llama-server:http://"):
        with pytest.raises(ValueError, match="llama-server:http://HOST:PORT"):
            parse_spec(bad)
    with pytest.raises(ValueError, match="mmproj"):
        parse_spec("llama-server:http://h:1;mmproj=p.gguf")


def test_completion_body_sends_token_ids_and_the_whole_sampling() -> None:
    sampling = SamplingParams(
        temperature=0.3,
        top_p=0.9,
        seed=7,
        max_tokens=12,
        grammar='root ::= "a"',
        logit_bias={5: -100.0, 9: 2.5},
    )
    body = completion_body(GenerateRequest((1, 2, 3), sampling))
    assert body["prompt"] == [1, 2, 3]
    assert body["stream"] and body["cache_prompt"] and body["return_tokens"]
    assert body["timings_per_token"]  # the reused-token count comes with the first token
    assert (body["n_predict"], body["temperature"], body["top_p"], body["seed"]) == (
        12,
        0.3,
        0.9,
        7,
    )
    assert body["samplers"] == ["top_p", "temperature"]  # the local chain, not the remote's
    assert body["grammar"] == 'root ::= "a"'
    assert body["logit_bias"] == [[5, False], [9, 2.5]]  # -100 bans
    plain = completion_body(GenerateRequest((1,), SamplingParams()))
    assert plain["n_predict"] == -1 and "grammar" not in plain and "logit_bias" not in plain
    assert plain["seed"] == 0xFFFFFFFF  # no seed: a random one per request
    assert remote_seed(2**32 + 3) == 3 and remote_seed(-1) == 0xFFFFFFFE  # never "random"


def connect(remote: RemoteServer) -> LlamaServerEngine:
    return LlamaServerEngine.connect("remote", remote.url, api_key=REMOTE_KEY)


def engine_text(remote: RemoteServer, ids: list[int]) -> str:
    """What the local engine makes of ``ids``."""
    local = LlamaEngine.load(CHATML, remote.model, threads=1)
    try:
        return local.detokenize(ids)
    finally:
        local.close_sync()


async def run(engine, request: GenerateRequest) -> list:
    return [event async for event in engine.generate(request)]


def test_model_info_and_tokens_match_the_local_engine(remote_chatml: RemoteServer) -> None:
    engine = connect(remote_chatml)
    local = LlamaEngine.load(CHATML, remote_chatml.model, threads=1)
    try:
        info, mine = engine.info, local.info
        assert info.context_size == SLOT_CONTEXT  # the remote's per-slot window
        assert (info.chat_template, info.bos_token, info.eos_token, info.n_vocab) == (
            mine.chat_template,
            mine.bos_token,
            mine.eos_token,
            mine.n_vocab,
        )
        assert info.eog_token_ids == (EOS_ID,)
        assert not info.accepts_images and not info.accepts_audio
        text = "<|im_start|>user\nhé, the sun<|im_end|>\n"
        assert engine.tokenize(text) == local.tokenize(text)
        assert engine.tokenize(text, special=False) == local.tokenize(text, special=False)
        assert engine.detokenize(local.tokenize(text)) == local.detokenize(local.tokenize(text))
        with pytest.raises(MediaError):
            engine.tokenize_media("<__media__>", [b"x"])
    finally:
        local.close_sync()
        asyncio.run(engine.close())


def test_generation_streams_every_token_and_the_remote_cache_count(
    remote_chatml: RemoteServer,
) -> None:
    engine = connect(remote_chatml)
    prompt = tuple(
        engine.tokenize("<|im_start|>user\nwarm me up<|im_end|>\n<|im_start|>assistant\n")
    )
    greedy = SamplingParams(temperature=0, max_tokens=24, logit_bias=NO_EOS)
    try:
        first = asyncio.run(run(engine, GenerateRequest(prompt, greedy)))
        again = asyncio.run(run(engine, GenerateRequest(prompt, greedy)))
    finally:
        asyncio.run(engine.close())
    for events in (first, again):
        assert isinstance(events[0], PromptEvaluated) and events[0].prompt_tokens == len(prompt)
        tokens = [e for e in events[1:-1] if isinstance(e, TokenGenerated)]
        assert tokens and len(tokens) == len(events) - 2
        assert events[-1] == GenerationFinished("length", 24)
        # The ids are the text's: what the remote streamed is what they detokenize to.
        ids = [e.token_id for e in tokens]
        assert "".join(e.text for e in tokens) == engine_text(remote_chatml, ids)
    # The second prompt is served from the remote's cache (all of it but the one token
    # llama-server always evaluates), and the count is the remote's.
    assert again[0].cached_tokens == len(prompt) - 1


def _progress(total: int, cache: int, processed: int) -> dict:
    """A progress report as llama-server streams it (``return_progress``), placeholder included."""
    report = {"total": total, "cache": cache, "processed": processed, "time_ms": 0}
    return {"index": 0, "content": "", "tokens": [0], "stop": False, "prompt_progress": report}


def test_the_remote_s_first_progress_report_opens_the_generation(
    remote_chatml: RemoteServer,
) -> None:
    """It comes as the remote starts on the prompt, with the count its cache serves: the
    turn opens then, while the remote evaluates the rest, not with the first token. A
    pool's replicas open with their first token (failover covers what comes before)."""
    engine = connect(remote_chatml)
    (a,) = engine.tokenize("a", special=False)
    token = {"index": 0, "content": "a", "tokens": [a], "stop": False, "tokens_predicted": 1}
    chunks = (_progress(40, 32, 32), _progress(40, 32, 40), token)

    def events(relay: CompletionRelay) -> list[list]:
        async def each() -> list[list]:
            return [await relay.events(chunk) for chunk in chunks]

        return asyncio.run(each())

    try:
        assert engine.opens_before_first_token
        early = events(CompletionRelay(engine, 40, open_on_progress=True))
        assert early == [[PromptEvaluated(40, 32)], [], [TokenGenerated(a, "a")]]
        late = events(CompletionRelay(engine, 40, open_on_progress=False))
        assert late == [[], [], [PromptEvaluated(40, 32), TokenGenerated(a, "a")]]
        pool = PoolEngine.connect("pooled", [(remote_chatml.url, lambda: connect(remote_chatml))])
        try:
            (replica,) = pool._replicas
            assert isinstance(replica.engine, LlamaServerEngine)
            assert not replica.engine.opens_before_first_token
        finally:
            asyncio.run(pool.close())
    finally:
        asyncio.run(engine.close())


def test_a_turn_goes_on_the_connection_opened_as_the_last_one_closed(
    remote_chatml: RemoteServer,
) -> None:
    # llama-server closes the connection of every streamed answer; the client opens the
    # next one at once, so that a turn does not wait for a connect.
    engine = connect(remote_chatml)
    prompt = tuple(engine.tokenize("<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n"))
    request = GenerateRequest(prompt, SamplingParams(max_tokens=4, logit_bias=NO_EOS))

    async def turns() -> list[tuple[int, int, int]]:
        # Per turn: connections opened before it, at its first event, and once the remote's
        # close of its connection is seen (the spare may open as the turn's last event is
        # read, or a little after).
        seen = []
        client = engine.async_client()
        for _ in range(3):
            before = client.opened
            events = engine.generate(request)
            assert isinstance(await anext(events), PromptEvaluated)
            at_first = client.opened
            assert isinstance([e async for e in events][-1], GenerationFinished)
            for _ in range(500):  # the remote's close seen, and its replacement open
                if client.opened == at_first + 1 and client.idle == 1:
                    break
                await asyncio.sleep(0.01)
            seen.append((before, at_first, client.opened))
        return seen

    try:
        assert asyncio.run(turns()) == [(0, 1, 2), (2, 2, 3), (3, 3, 4)]
    finally:
        asyncio.run(engine.close())


def test_overflow_and_unreachable_remote(remote_chatml: RemoteServer) -> None:
    engine = connect(remote_chatml)
    try:
        with pytest.raises(ContextOverflowError):
            engine.generate(GenerateRequest(tuple([65] * SLOT_CONTEXT), SamplingParams()))
    finally:
        asyncio.run(engine.close())
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(EngineUnavailableError, match=url) as caught:
        LlamaServerEngine.connect("gone", url)
    assert caught.value.code == "engine_unavailable"


def test_a_url_that_is_not_llama_server_is_unavailable(sf_start_standalone) -> None:
    other = sf_start_standalone()  # an HTTP server, but superfluid's, not llama-server's
    with pytest.raises(EngineUnavailableError, match=other.url):
        LlamaServerEngine.connect("m", other.url)


def test_registry_connects_lazily_and_retries_after_a_failure(
    remote_chatml: RemoteServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LLAMA_API_KEY", REMOTE_KEY)
    down = f"http://127.0.0.1:{free_port()}"
    registry = ModelRegistry([f"up=llama-server:{remote_chatml.url}", f"down=llama-server:{down}"])
    assert registry.ids() == ["up", "down"] and registry.loaded("up") is None
    engine = asyncio.run(registry.get("up"))
    assert isinstance(engine, LlamaServerEngine) and registry.loaded("up") is engine
    for _ in range(2):  # no failed state is kept: each request tries again
        with pytest.raises(EngineUnavailableError, match=down):
            asyncio.run(registry.get("down"))
    asyncio.run(registry.close())


def test_a_remote_restarted_with_another_model_is_refused_until_it_is_back(
    start_remote, tmp_path: Path
) -> None:
    remote = start_remote(CHATML)
    engine = LlamaServerEngine.connect("m", remote.url, api_key=REMOTE_KEY, props_ttl=0)
    chatml = remote.model
    try:
        assert engine.tokenize("one")
        remote.stop()
        with pytest.raises(EngineUnavailableError, match=remote.url):
            engine.tokenize("two")
        # The same port, another model (another chat template): stored token ids of the
        # old model would be sent to it, so it is refused under the old id.
        remote.model = ensure_builtin("superfluid/tiny-qwen3", chatml.parent)
        remote.start()
        with pytest.raises(EngineUnavailableError, match="now serves another model"):
            engine.tokenize("three")
        remote.stop()
        remote.model = chatml
        remote.start()
        assert engine.tokenize("four")
        request = GenerateRequest(tuple(engine.tokenize("five")), SamplingParams(max_tokens=4))
        assert asyncio.run(run(engine, request))[-1].reason in ("stop", "length")
    finally:
        asyncio.run(engine.close())
        remote.stop()

"""``POST /v1/completions`` through the official openai SDK: plain, streamed, fill-in-the-middle."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import httpx
import openai
import pytest
from support.engine_processes import settled_tokens
from support.no_eos import NO_EOS_WIRE, RUN_TO_CAP
from support.slow_model import slow_model

from jupyter_superfluid.builtin_models.tiny_gguf import FIM_TOKENS
from jupyter_superfluid.engine.local.llama import LlamaEngine
from jupyter_superfluid.generation.fim import fim_prompt, fim_tokens, text_tokens

CHATML = "superfluid/tiny-chatml"  # no FIM tokens
QWEN = "superfluid/tiny-qwen3"  # <|fim_prefix|>, <|fim_suffix|>, <|fim_middle|>
PREFIX, SUFFIX = "def add(a, b):\n    ", "\n    return total\n"


def prompt_count(client: openai.OpenAI, prompt: str) -> int:
    """Tokens of ``prompt`` as a plain completion prompt."""
    return client.completions.create(model=QWEN, prompt=prompt, max_tokens=1).usage.prompt_tokens


def test_completion_counts_tokens(openai_client):
    out = openai_client.completions.create(
        model=CHATML, prompt="Once upon", max_tokens=7, seed=1, logit_bias=NO_EOS_WIRE
    )
    choice = out.choices[0]
    assert out.object == "text_completion" and out.id.startswith("cmpl-")
    assert out.model == CHATML and choice.index == 0 and choice.logprobs is None
    assert choice.finish_reason == "length" and out.usage.completion_tokens == 7
    assert isinstance(choice.text, str) and choice.text
    assert out.usage.total_tokens == out.usage.prompt_tokens + 7
    assert out.usage.prompt_tokens_details.cached_tokens <= out.usage.prompt_tokens


def test_stream_gives_the_same_text_and_usage(openai_client):
    kwargs = dict(model=CHATML, prompt="Once upon", max_tokens=9, seed=3, logit_bias=NO_EOS_WIRE)
    whole = openai_client.completions.create(**kwargs)
    chunks = list(
        openai_client.completions.create(
            stream=True, stream_options={"include_usage": True}, **kwargs
        )
    )
    text = "".join(c.choices[0].text for c in chunks if c.choices)
    assert text == whole.choices[0].text
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finishes[-1] == "length" and set(finishes[:-1]) == {None}
    assert {c.object for c in chunks} == {"text_completion"}
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 9
    assert chunks[-1].usage.prompt_tokens == whole.usage.prompt_tokens


def test_warm_header_and_done(standalone):
    body = {"model": CHATML, "prompt": "warm me up please", "max_tokens": 2, "seed": 0}
    first = httpx.post(standalone.base_url + "/completions", json=body, timeout=60)
    again = httpx.post(standalone.base_url + "/completions", json=body, timeout=60)
    assert first.status_code == again.status_code == 200, first.text
    cached = again.json()["usage"]["prompt_tokens_details"]["cached_tokens"]
    assert int(again.headers["x-superfluid-warm"]) == cached > 0
    with httpx.stream(
        "POST", standalone.base_url + "/completions", json={**body, "stream": True}, timeout=60
    ) as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        assert int(r.headers["x-superfluid-warm"]) > 0
        data = [line[6:] for line in r.iter_lines() if line.startswith("data: ")]
    assert data[-1] == "[DONE]" and all(json.loads(d)["choices"] for d in data[:-1])


def test_token_id_prompt_and_stop(openai_client):
    ids = [72, 101, 108, 108, 111]  # five byte tokens
    out = openai_client.completions.create(model=CHATML, prompt=ids, max_tokens=3, seed=0)
    assert out.usage.prompt_tokens == len(ids)
    kwargs = dict(model=CHATML, prompt="s", max_tokens=40, seed=12, temperature=1.0)
    whole = openai_client.completions.create(**kwargs).choices[0].text
    assert len(whole) > 6
    stop = whole[4:6]
    cut = openai_client.completions.create(stop=[stop], **kwargs).choices[0]
    assert cut.text == whole[: whole.index(stop)] and cut.finish_reason == "stop"


def test_fill_in_the_middle_prompt(openai_client):
    n_prefix, n_suffix = prompt_count(openai_client, PREFIX), prompt_count(openai_client, SUFFIX)
    out = openai_client.completions.create(
        model=QWEN, prompt=PREFIX, suffix=SUFFIX, max_tokens=6, seed=2, logit_bias=NO_EOS_WIRE
    )
    assert out.usage.prompt_tokens == n_prefix + n_suffix + 3
    assert out.usage.completion_tokens == 6 and out.choices[0].finish_reason == "length"
    streamed = openai_client.completions.create(
        model=QWEN,
        prompt=PREFIX,
        suffix=SUFFIX,
        max_tokens=6,
        seed=2,
        logit_bias=NO_EOS_WIRE,
        stream=True,
    )
    assert "".join(c.choices[0].text for c in streamed if c.choices) == out.choices[0].text
    ids = openai_client.completions.create(
        model=QWEN, prompt=[100, 101], suffix="", max_tokens=1, seed=0
    )
    assert ids.usage.prompt_tokens == 2 + 3


def test_fim_prompt_ids_from_metadata_and_from_spellings(sf_models: dict[str, Path]):
    engine = LlamaEngine.load(QWEN, sf_models[QWEN])
    plain = LlamaEngine.load(CHATML, sf_models[CHATML])
    try:
        fim = tuple(engine.tokenize(t)[0] for t in FIM_TOKENS)
        assert engine.info.fim_tokens == fim_tokens(engine) == fim
        pre, suf = text_tokens(engine, PREFIX), text_tokens(engine, SUFFIX)
        assert fim_prompt(engine, fim, pre, suf) == [fim[0], *pre, fim[1], *suf, fim[2]]
        # A remote engine's ModelInfo has no FIM ids: they are found by their spelling.
        assert fim_tokens(Unlabelled(engine)) == fim
        assert plain.info.fim_tokens is None and fim_tokens(plain) is None
        assert text_tokens(engine, "<|fim_prefix|>") != [fim[0]]  # user text stays text
    finally:
        engine.close_sync()
        plain.close_sync()


class Unlabelled:
    """An engine whose ModelInfo names no FIM tokens (as a remote's does)."""

    def __init__(self, engine: LlamaEngine) -> None:
        self.engine = engine
        self.info = dataclasses.replace(engine.info, fim_tokens=None)

    def tokenize(self, text: str, *, special: bool = True) -> list[int]:
        return self.engine.tokenize(text, special=special)


TOO_LONG = "context_length_exceeded"
BAD = [
    ({"prompt": "x"}, "model", None),
    ({"model": 5, "prompt": "x"}, "model", None),
    ({"model": CHATML}, "prompt", None),
    ({"model": CHATML, "prompt": 5}, "prompt", None),
    ({"model": CHATML, "prompt": [1, "a"]}, "prompt[1]", None),
    ({"model": CHATML, "prompt": ""}, "prompt", None),
    ({"model": CHATML, "prompt": []}, "prompt", None),
    ({"model": CHATML, "prompt": ["a", "b"]}, "prompt", "unsupported_parameter"),
    ({"model": CHATML, "prompt": [10**6]}, "prompt", None),
    ({"model": CHATML, "prompt": "x", "max_tokens": "many"}, "max_tokens", None),
    ({"model": CHATML, "prompt": "x", "max_tokens": 0}, "max_tokens", None),
    ({"model": CHATML, "prompt": "x", "temperature": 5}, "temperature", None),
    ({"model": CHATML, "prompt": "x", "suffix": 3}, "suffix", None),
    ({"model": CHATML, "prompt": "x", "stop": [1]}, "stop[0]", None),
    ({"model": CHATML, "prompt": "x", "stream": "yes"}, "stream", None),
    ({"model": CHATML, "prompt": "x", "stream_options": {"include_usage": 1}}, None, None),
    ({"model": CHATML, "prompt": "x", "seed": 1.5}, "seed", None),
    ({"model": CHATML, "prompt": "x", "n": "2"}, "n", None),
    ({"model": CHATML, "prompt": "x", "logit_bias": {"999999": 1}}, "logit_bias", None),
    ({"model": CHATML, "prompt": "x", "n": 2}, "n", "unsupported_parameter"),
    ({"model": CHATML, "prompt": "x", "echo": True}, "echo", "unsupported_parameter"),
    ({"model": CHATML, "prompt": "x", "logprobs": 1}, "logprobs", "unsupported_parameter"),
    ({"model": CHATML, "prompt": "x", "best_of": 2}, "best_of", "unsupported_parameter"),
    ({"model": "nope", "prompt": "x"}, "model", "model_not_found"),
    ({"model": CHATML, "prompt": "x", "suffix": "y"}, "suffix", "unsupported_parameter"),
    ({"model": CHATML, "prompt": "x" * 20000}, "prompt", TOO_LONG),
    ({"model": QWEN, "prompt": "x" * 1500, "suffix": "y" * 1500}, "prompt", TOO_LONG),
]


@pytest.mark.parametrize(("body", "param", "code"), BAD)
def test_bad_input_is_a_400_naming_the_field(standalone, body, param, code):
    r = httpx.post(standalone.base_url + "/completions", json=body, timeout=30)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    if param is not None:
        assert err["param"] == param
    assert err["message"] and err["type"] == "invalid_request_error"
    if code:
        assert err["code"] == code
    if code == "unsupported_parameter" and param == "suffix":
        assert "fill-in-the-middle" in err["message"]


def test_the_served_values_are_accepted(openai_client):
    out = openai_client.completions.create(
        model=CHATML, prompt="x", n=1, echo=False, best_of=1, max_tokens=2, logprobs=None
    )
    assert out.usage.completion_tokens <= 2


def test_unknown_model_via_sdk_is_what_chat_answers(openai_client):
    with pytest.raises(openai.BadRequestError) as info:
        openai_client.completions.create(model="ghost", prompt="x")
    assert info.value.code == "model_not_found"


def test_disconnect_mid_stream_stops_the_engine(sf_start_standalone, sf_model_cache):
    # The slow model takes ~9 s for 1800 tokens: the disconnect comes long before the end.
    server = sf_start_standalone("--threads=1", models=(f"slow={slow_model(sf_model_cache)}",))
    body = {"model": "slow", "prompt": "go", "stream": True, "max_tokens": 1800, **RUN_TO_CAP}
    with httpx.stream("POST", server.base_url + "/completions", json=body, timeout=60) as r:
        assert r.status_code == 200
        next(line for line in r.iter_lines() if line.startswith("data: "))
    assert settled_tokens(server.url, "slow") - 8 < 1800  # it stopped before its end


async def test_completions_inside_jupyter(jp_fetch, jp_http_port, jp_base_url, jp_serverapp):
    client = openai.AsyncOpenAI(
        base_url=f"http://localhost:{jp_http_port}{jp_base_url}v1",
        api_key=jp_serverapp.identity_provider.token,
        max_retries=0,
        timeout=120,
    )
    kwargs = dict(model=QWEN, prompt=PREFIX, suffix=SUFFIX, max_tokens=5, seed=1)
    out = await client.completions.create(logit_bias=NO_EOS_WIRE, **kwargs)
    assert out.choices[0].finish_reason == "length" and out.usage.completion_tokens == 5
    stream = await client.completions.create(logit_bias=NO_EOS_WIRE, stream=True, **kwargs)
    text = "".join([c.choices[0].text async for c in stream if c.choices])
    assert text == out.choices[0].text
    with pytest.raises(openai.BadRequestError) as info:
        await client.completions.create(model=CHATML, prompt="x", suffix="y")
    assert (info.value.code, info.value.param) == ("unsupported_parameter", "suffix")

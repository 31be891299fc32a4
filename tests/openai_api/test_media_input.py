"""Images and audio as input, end to end: real server, real tiny projectors, the openai SDK.

Structure and token counts only; the tiny models' text is gibberish.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from support.media_samples import b64, data_url, png, wav
from support.no_eos import NO_EOS_WIRE, RUN_TO_CAP

from jupyter_superfluid.builtin_models.tiny_mmproj import AUDIO_TOKENS_PER_WINDOW, IMAGE_TOKENS
from jupyter_superfluid.pytest_plugin import StandaloneServer, start_standalone

CHATML = "superfluid/tiny-chatml"
VISION = "superfluid/tiny-vision"
AUDIO = "superfluid/tiny-audio"


@pytest.fixture(scope="module")
def server(sf_model_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A standalone server serving a text-only, a vision and an audio model."""
    srv = start_standalone(
        sf_model_cache, tmp_path_factory.mktemp("media"), models=(CHATML, VISION, AUDIO)
    )
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def client(server: StandaloneServer) -> openai.OpenAI:
    """The sync OpenAI client on that server."""
    return openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0, timeout=120)


def image_part(data: bytes) -> dict[str, Any]:
    """A Responses ``input_image`` part carrying ``data`` as a data: URL."""
    return {"type": "input_image", "image_url": data_url(data), "detail": "auto"}


def audio_part(data: bytes) -> dict[str, Any]:
    """An ``input_audio`` part (the same shape on both APIs)."""
    return {"type": "input_audio", "input_audio": {"data": b64(data), "format": "wav"}}


def user(*parts: dict[str, Any], text: str = "what is this") -> list[dict[str, Any]]:
    """One user message: a text part, then ``parts``."""
    return [{"role": "user", "content": [{"type": "input_text", "text": text}, *parts]}]


def respond(client: openai.OpenAI, model: str, items: Any, **kw: Any) -> Any:
    """A short response that runs to its cap, asserted to have run."""
    kw.setdefault("extra_body", RUN_TO_CAP)
    r = client.responses.create(model=model, input=items, max_output_tokens=4, **kw)
    assert r.status == "incomplete" and r.usage.output_tokens == 4
    assert r.error is None and [o.type for o in r.output] == ["message"]
    return r


# -- Responses ------------------------------------------------------------------------


def test_image_response_counts_its_positions(client: openai.OpenAI) -> None:
    a, b = png(20, 12, seed=101), png(12, 12, seed=102)
    one = respond(client, VISION, user(image_part(a)))
    two = respond(client, VISION, user(image_part(a), image_part(b)))
    assert one.model == VISION
    assert one.usage.input_tokens > IMAGE_TOKENS
    assert two.usage.input_tokens - one.usage.input_tokens == IMAGE_TOKENS
    assert one.usage.total_tokens == one.usage.input_tokens + one.usage.output_tokens


def test_image_response_streams(client: openai.OpenAI) -> None:
    items = user(image_part(png(16, 16, seed=111)))
    plain = respond(client, VISION, items)
    events = list(
        client.responses.create(
            model=VISION, input=items, max_output_tokens=4, stream=True, extra_body=RUN_TO_CAP
        )
    )
    types = [e.type for e in events]
    assert types[0] == "response.created"
    assert types[-1] == "response.incomplete"
    assert [e.sequence_number for e in events] == list(range(len(events)))
    final = events[-1].response
    assert final.usage.input_tokens == plain.usage.input_tokens
    assert client.responses.retrieve(final.id).usage.input_tokens == plain.usage.input_tokens


def stored_content(server: StandaloneServer, rid: str) -> list[dict[str, Any]]:
    """The content parts of a stored response's one input item, as the JSON lists them."""
    r = httpx.get(f"{server.base_url}/responses/{rid}/input_items", timeout=30)
    r.raise_for_status()
    (item,) = r.json()["data"]
    assert item["type"] == "message" and item["role"] == "user"
    return list(item["content"])


def test_input_items_keep_the_image_part(client: openai.OpenAI, server: StandaloneServer) -> None:
    part = image_part(png(10, 10, seed=121))
    r = respond(client, VISION, user(part))
    assert stored_content(server, r.id) == [{"type": "input_text", "text": "what is this"}, part]
    assert len(client.responses.input_items.list(r.id).data) == 1


def test_continuation_with_an_image_is_warm(client: openai.OpenAI) -> None:
    first = respond(client, VISION, user(image_part(png(16, 16, seed=131))))
    again = respond(client, VISION, "and this one?", previous_response_id=first.id)
    # The whole first prompt (image placeholders included) comes from the prefix cache.
    assert again.usage.input_tokens_details.cached_tokens >= first.usage.input_tokens
    assert again.usage.input_tokens > first.usage.input_tokens
    # A new image in the next turn comes after the stored one.
    third = respond(
        client, VISION, user(image_part(png(8, 8, seed=132))), previous_response_id=again.id
    )
    assert third.usage.input_tokens_details.cached_tokens >= again.usage.input_tokens
    assert third.usage.input_tokens > again.usage.input_tokens + IMAGE_TOKENS
    listed = client.responses.input_items.list(third.id, order="asc")
    assert [i.type for i in listed.data] == ["message"]


def test_same_image_is_served_warm_another_is_not(client: openai.OpenAI) -> None:
    text = "compare these pictures, please"
    first = respond(client, VISION, user(image_part(png(24, 24, seed=141)), text=text))
    same = respond(client, VISION, user(image_part(png(24, 24, seed=141)), text=text))
    other = respond(client, VISION, user(image_part(png(24, 24, seed=142)), text=text))
    n = first.usage.input_tokens
    assert same.usage.input_tokens == other.usage.input_tokens == n
    cached_same = same.usage.input_tokens_details.cached_tokens
    cached_other = other.usage.input_tokens_details.cached_tokens
    # At least one token follows the image, so a miss at the image caches < n - 16.
    assert cached_other < n - IMAGE_TOKENS
    assert cached_same >= cached_other + IMAGE_TOKENS


def test_audio_response(client: openai.OpenAI, server: StandaloneServer) -> None:
    part = audio_part(wav(0.5, 440))
    one = respond(client, AUDIO, user(part))
    two = respond(client, AUDIO, user(part, audio_part(wav(1.0, 220))))
    assert two.usage.input_tokens - one.usage.input_tokens == AUDIO_TOKENS_PER_WINDOW
    assert stored_content(server, one.id)[1] == part


# -- chat completions -----------------------------------------------------------------


def chat_user(*parts: dict[str, Any]) -> list[dict[str, Any]]:
    """One chat-completions user message: a text part, then ``parts``."""
    return [{"role": "user", "content": [{"type": "text", "text": "what is this"}, *parts]}]


def chat_image(data: bytes) -> dict[str, Any]:
    """A chat-completions ``image_url`` part with a data: URL."""
    return {"type": "image_url", "image_url": {"url": data_url(data)}}


def chat(client: openai.OpenAI, model: str, messages: Any) -> Any:
    """A short chat completion that runs to its cap, asserted to have run."""
    c = client.chat.completions.create(
        model=model, messages=messages, max_tokens=4, seed=1, logit_bias=NO_EOS_WIRE
    )
    assert c.choices[0].finish_reason == "length" and c.usage.completion_tokens == 4
    assert c.choices[0].message.role == "assistant"
    return c


def test_chat_completions_image_url(client: openai.OpenAI) -> None:
    a, b = png(16, 16, seed=151), png(16, 8, seed=152)
    one = chat(client, VISION, chat_user(chat_image(a)))
    two = chat(client, VISION, chat_user(chat_image(a), chat_image(b)))
    assert two.usage.prompt_tokens - one.usage.prompt_tokens == IMAGE_TOKENS
    chunks = list(
        client.chat.completions.create(
            model=VISION,
            messages=chat_user(chat_image(a)),
            max_tokens=4,
            seed=1,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    assert chunks[-1].usage.prompt_tokens == one.usage.prompt_tokens


def test_chat_completions_input_audio(client: openai.OpenAI) -> None:
    one = chat(client, AUDIO, chat_user(audio_part(wav(0.5, 330))))
    two = chat(client, AUDIO, chat_user(audio_part(wav(0.5, 330)), audio_part(wav(0.2, 660))))
    assert two.usage.prompt_tokens - one.usage.prompt_tokens == AUDIO_TOKENS_PER_WINDOW


# -- errors ---------------------------------------------------------------------------

PNG = png(8, 8, seed=161)
WAV = wav(0.2, 440)
CORRUPT_PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 40
P1 = "input[0].content[1]"

RESPONSES_BAD = [
    pytest.param(CHATML, image_part(PNG), "unsupported_input", P1, id="image-to-text-model"),
    pytest.param(VISION, audio_part(WAV), "unsupported_input", P1, id="audio-to-vision"),
    pytest.param(AUDIO, image_part(PNG), "unsupported_input", P1, id="image-to-audio"),
    pytest.param(
        VISION,
        {"type": "input_image", "image_url": "data:image/png;base64,@@not base64@@"},
        "invalid_request",
        P1 + ".image_url",
        id="bad-base64",
    ),
    pytest.param(
        VISION,
        {"type": "input_image", "image_url": "data:image/png;base64"},
        "invalid_request",
        P1 + ".image_url",
        id="bad-data-url",
    ),
    pytest.param(
        VISION,
        image_part(b"plain text, not an image at all"),
        "invalid_image",
        P1,
        id="not-an-image",
    ),
    pytest.param(VISION, image_part(CORRUPT_PNG), "invalid_image", P1, id="corrupt-png"),
    pytest.param(VISION, image_part(WAV), "invalid_image", P1, id="wav-as-image"),
    pytest.param(AUDIO, audio_part(PNG), "invalid_audio", P1, id="png-as-audio"),
    pytest.param(
        VISION,
        {"type": "input_image", "image_url": "https://example.com/cat.png"},
        "unsupported_input",
        P1 + ".image_url",
        id="remote-url",
    ),
    pytest.param(
        AUDIO,
        {"type": "input_audio", "input_audio": {"data": "%%%", "format": "wav"}},
        "invalid_request",
        P1 + ".input_audio.data",
        id="audio-bad-base64",
    ),
    pytest.param(
        AUDIO,
        {"type": "input_audio", "input_audio": {"data": b64(WAV), "format": "ogg"}},
        "invalid_request",
        P1 + ".input_audio.format",
        id="audio-bad-format",
    ),
]


@pytest.mark.parametrize(("model", "part", "code", "param"), RESPONSES_BAD)
def test_responses_media_errors(
    client: openai.OpenAI, model: str, part: dict[str, Any], code: str, param: str
) -> None:
    with pytest.raises(openai.BadRequestError) as err:
        client.responses.create(model=model, input=user(part), max_output_tokens=2)
    assert err.value.status_code == 400
    assert (err.value.code, err.value.param) == (code, param)
    assert err.value.body["type"] == "invalid_request_error"  # type: ignore[index]


CHAT_BAD = [
    pytest.param(CHATML, chat_image(PNG), "unsupported_input", "messages[0].content[1]"),
    pytest.param(VISION, audio_part(WAV), "unsupported_input", "messages[0].content[1]"),
    pytest.param(
        VISION,
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,!!"}},
        "invalid_request",
        "messages[0].content[1].image_url.url",
    ),
    pytest.param(
        VISION,
        {"type": "image_url", "image_url": {"url": "http://example.com/a.png"}},
        "unsupported_input",
        "messages[0].content[1].image_url.url",
    ),
    pytest.param(VISION, chat_image(b"GIF89a?"), "invalid_image", "messages[0].content[1]"),
]


@pytest.mark.parametrize(("model", "part", "code", "param"), CHAT_BAD)
def test_chat_completions_media_errors(
    client: openai.OpenAI, model: str, part: dict[str, Any], code: str, param: str
) -> None:
    with pytest.raises(openai.BadRequestError) as err:
        client.chat.completions.create(model=model, messages=chat_user(part), max_tokens=2)
    assert (err.value.code, err.value.param) == (code, param)


def test_stored_image_on_a_text_model_names_previous_response(client: openai.OpenAI) -> None:
    first = respond(client, VISION, user(image_part(png(8, 8, seed=171))))
    with pytest.raises(openai.BadRequestError) as err:
        client.responses.create(
            model=CHATML, input="more", previous_response_id=first.id, max_output_tokens=2
        )
    assert (err.value.code, err.value.param) == ("unsupported_input", "previous_response_id")


def test_media_only_in_message_content(client: openai.OpenAI) -> None:
    items = [
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": [image_part(PNG)]},
    ]
    with pytest.raises(openai.BadRequestError) as err:
        client.responses.create(model=VISION, input=items, max_output_tokens=2)
    assert (err.value.code, err.value.param) == ("unsupported_input", "input[1].output[0]")


def test_marker_text_with_media_is_a_400(server: StandaloneServer) -> None:
    body = {
        "model": VISION,
        "max_output_tokens": 2,
        "input": user(image_part(PNG), text="<__media__> is special"),
    }
    r = httpx.post(server.base_url + "/responses", json=body, timeout=60)
    assert r.status_code == 400
    assert r.json()["error"]["type"] == "invalid_request_error"
    # The same text without media is plain text.
    body["input"] = "<__media__> is special"
    assert httpx.post(server.base_url + "/responses", json=body, timeout=60).status_code == 200


def test_sample_helpers_round_trip() -> None:
    assert base64.b64decode(data_url(PNG).split(",", 1)[1]) == PNG

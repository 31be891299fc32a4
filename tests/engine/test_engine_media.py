"""Images and audio through the engine: placeholders, media batches, the prefix cache."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from sf_engine_helpers import Generation, agenerate
from support.media_samples import png

from jupyter_superfluid.builtin_models.tiny_mmproj import IMAGE_TOKENS
from jupyter_superfluid.engine.base import (
    MEDIA_MARKER,
    EngineError,
    GenerateRequest,
    MediaError,
    SamplingParams,
)
from jupyter_superfluid.engine.local.llama import LlamaEngine

MakeEngine = Callable[..., LlamaEngine]


def _request(engine: LlamaEngine, text: str, media: list[bytes], **sampling: object):
    """A GenerateRequest for ``text`` with ``media`` in place of its markers."""
    prompt = engine.tokenize_media(text, media)
    return GenerateRequest(prompt.tokens, SamplingParams(**sampling), media=prompt.media)


def _text(question: str) -> str:
    return f"<|im_start|>user\n{MEDIA_MARKER}{question}<|im_end|>\n<|im_start|>assistant\n"


@pytest.fixture
def vision(sf_make_engine: MakeEngine) -> LlamaEngine:
    return sf_make_engine("superfluid/tiny-vision")


def _run(engine: LlamaEngine, request: GenerateRequest) -> Generation:
    async def go() -> Generation:
        return Generation([event async for event in engine.generate(request)])

    return asyncio.run(go())


def test_a_projector_makes_the_model_accept_its_kind(
    vision: LlamaEngine, sf_make_engine: MakeEngine
) -> None:
    assert vision.info.accepts_images and not vision.info.accepts_audio
    audio = sf_make_engine("superfluid/tiny-audio")
    assert audio.info.accepts_audio and not audio.info.accepts_images
    text_only = sf_make_engine()
    assert not text_only.info.accepts_images and not text_only.info.accepts_audio
    with pytest.raises(MediaError):
        text_only.tokenize_media(_text("what?"), [png(8, 8, seed=1)])


def test_an_image_prompt_generates_and_counts_its_positions(vision: LlamaEngine) -> None:
    request = _request(vision, _text("what is it?"), [png(40, 30, seed=1)], seed=1, max_tokens=5)
    text_only = vision.tokenize(_text("what is it?").replace(MEDIA_MARKER, ""))
    assert len(request.prompt_tokens) == len(text_only) + IMAGE_TOKENS
    run = _run(vision, request)
    assert run.prompt.prompt_tokens == len(request.prompt_tokens)
    assert run.prompt.cached_tokens == 0
    assert run.finished.reason in ("length", "stop") and run.finished.error is None
    assert len(run.tokens) == run.finished.completion_tokens


def test_the_same_image_is_served_from_the_prefix_cache(vision: LlamaEngine) -> None:
    image = png(40, 30, seed=1)
    request = _request(vision, _text("what is it?"), [image], seed=4, max_tokens=6)
    first = _run(vision, request)
    before = vision.prompt_tokens_evaluated
    again = _run(vision, _request(vision, _text("what is it?"), [image], seed=4, max_tokens=6))
    assert again.prompt.cached_tokens == len(request.prompt_tokens) - 1
    assert vision.prompt_tokens_evaluated - before == 1
    assert again.tokens == first.tokens  # the cached image is the evaluated one
    # Another image after the same long text: the text is served from the cache, up to
    # the image (long enough to be worth copying into another slot's KV stream).
    system = "<|im_start|>system\n" + "Look closely. " * 20 + "<|im_end|>\n"
    _run(vision, _request(vision, system + _text("what is it?"), [image], seed=4, max_tokens=2))
    other = _request(vision, system + _text("what is it?"), [png(40, 30, seed=2)], seed=4)
    start = other.prompt_tokens.index(other.media[0].placeholder_id)
    assert _run(vision, other).prompt.cached_tokens == start  # shared text only


def test_media_and_text_sequences_batch_together_exactly(vision: LlamaEngine) -> None:
    image_request = _request(
        vision, _text("and this?"), [png(16, 16, seed=3)], seed=7, max_tokens=8
    )
    text_prompt = vision.tokenize(_text("plain words").replace(MEDIA_MARKER, ""))

    async def both() -> list[Generation]:
        async def image() -> Generation:
            return Generation([e async for e in vision.generate(image_request)])

        return list(
            await asyncio.gather(image(), agenerate(vision, text_prompt, seed=7, max_tokens=8))
        )

    together = asyncio.run(both())
    alone = _run(vision, image_request)  # warm now: only the last token is evaluated
    assert together[0].tokens == alone.tokens
    assert together[1].finished.error is None


def test_placeholders_must_match_the_media(vision: LlamaEngine) -> None:
    request = _request(vision, _text("x"), [png(8, 8, seed=1)], max_tokens=2)
    with pytest.raises(EngineError):
        vision.generate(GenerateRequest(request.prompt_tokens, request.sampling))
    with pytest.raises(EngineError):
        vision.generate(
            GenerateRequest(request.prompt_tokens[:-20], request.sampling, media=request.media)
        )

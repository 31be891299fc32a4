"""Images as input inside a real Jupyter server: the same chat path, Jupyter's auth."""

from __future__ import annotations

import copy
from typing import Any

import openai
import pytest
from support.media_samples import data_url, png
from support.no_eos import RUN_TO_CAP

from jupyter_superfluid.builtin_models.tiny_mmproj import IMAGE_TOKENS

VISION = "superfluid/tiny-vision"


@pytest.fixture
def jp_server_config(sf_jupyter_config: dict[str, Any]) -> dict[str, Any]:
    """The shared Jupyter config, also offering the tiny vision model."""
    config = copy.deepcopy(sf_jupyter_config)
    config["Superfluid"]["models"] = [*config["Superfluid"]["models"], VISION]
    return config


def _content(*images: bytes) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = [{"type": "input_text", "text": "what is this"}]
    parts += [
        {"type": "input_image", "image_url": data_url(image, "image/png")} for image in images
    ]
    return [{"role": "user", "content": parts}]


async def test_images_inside_jupyter(jp_fetch, jp_http_port, jp_base_url, jp_serverapp) -> None:
    client = openai.AsyncOpenAI(
        base_url=f"http://localhost:{jp_http_port}{jp_base_url}v1",
        api_key=jp_serverapp.identity_provider.token,
        max_retries=0,
        timeout=120,
    )
    image = png(24, 24, seed=5)
    one = await client.responses.create(
        model=VISION, input=_content(image), max_output_tokens=3, extra_body=RUN_TO_CAP
    )
    two = await client.responses.create(
        model=VISION, input=_content(image, png(24, 24, seed=6)), max_output_tokens=3
    )
    assert one.status == "incomplete" and one.usage.output_tokens == 3
    assert two.usage is not None
    assert two.usage.input_tokens - one.usage.input_tokens == IMAGE_TOKENS
    nxt = await client.responses.create(
        previous_response_id=one.id, input="and now?", max_output_tokens=3
    )
    assert nxt.usage is not None
    assert nxt.usage.input_tokens_details.cached_tokens >= one.usage.input_tokens
    with pytest.raises(openai.BadRequestError) as info:
        await client.responses.create(
            model="superfluid/tiny-chatml", input=_content(image), max_output_tokens=3
        )
    assert info.value.code == "unsupported_input"
    assert info.value.param == "input[0].content[1]"

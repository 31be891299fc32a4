"""A conversation on a template that renders earlier turns anew (Qwen3's), continued by id.

Such a turn cannot be forked; its prompt is extended from the stored one (the tokens up
to its generation prompt kept, the rest tokenized). Through the openai SDK against the
standalone server: continued by ``previous_response_id`` or resent whole, the prompt is
the same, token for token, turn after turn.
"""

from __future__ import annotations

from typing import Any

import openai
from support.no_eos import RUN_TO_CAP

QWEN = "superfluid/tiny-qwen3"
NONE = {"effort": "none"}


def whole_count(client: openai.OpenAI, items: list[Any]) -> int:
    counted = client.responses.input_tokens.count(model=QWEN, input=items, reasoning=NONE)
    return counted.input_tokens


def test_continued_turns_are_the_whole_conversations_prompt(openai_client: openai.OpenAI):
    items: list[Any] = []
    previous = None
    for n, text in enumerate(["first question", "a second, longer question", "third"]):
        items.append({"role": "user", "content": text})
        made = openai_client.responses.create(
            model=QWEN,
            input=text,
            previous_response_id=previous,
            reasoning=NONE,
            max_output_tokens=6,  # cut by the cap: an incomplete turn is extended too
            extra_body={**RUN_TO_CAP, "seed": n},
        )
        assert made.status == "incomplete" and made.usage is not None
        assert made.usage.input_tokens == whole_count(openai_client, items)
        items += [o.model_dump(exclude_none=True) for o in made.output]
        previous = made.id
    # The third turn was served warm from the second's prompt, kept up to its end.
    assert made.usage.input_tokens_details.cached_tokens > 0

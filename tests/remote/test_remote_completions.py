"""``POST /v1/completions`` over real llama-server remotes: created, streamed, fill-in-the-middle.

The prompt, a FIM one included, goes to the remote's ``/completion`` as token ids; what
the remote evaluated and generated is read from its own ``/metrics``.
"""

from __future__ import annotations

import openai
import pytest
from support.no_eos import NO_EOS_WIRE

from .helpers import RemoteServer

PREFIX, SUFFIX = "def add(a, b):\n    ", "\n    return total\n"


def test_completions_are_generated_by_the_remote(over_remotes, remote_qwen: RemoteServer):
    client = openai.OpenAI(base_url=over_remotes.base_url, api_key="x", max_retries=0, timeout=120)
    kwargs = dict(model="qwen", max_tokens=6, seed=4, logit_bias=NO_EOS_WIRE)
    before = remote_qwen.wait_idle()
    plain = client.completions.create(prompt=PREFIX, **kwargs)
    after = remote_qwen.wait_idle()
    assert plain.choices[0].finish_reason == "length" and plain.usage.completion_tokens == 6
    assert after["tokens_predicted_total"] - before["tokens_predicted_total"] == 6
    stream = client.completions.create(prompt=PREFIX, stream=True, **kwargs)
    assert "".join(c.choices[0].text for c in stream if c.choices) == plain.choices[0].text
    # FIM: the ids of <|fim_prefix|>… come from the remote's vocabulary (their spelling).
    n_suffix = client.completions.create(prompt=SUFFIX, **kwargs).usage.prompt_tokens
    fim = client.completions.create(prompt=PREFIX, suffix=SUFFIX, **kwargs)
    assert fim.usage.prompt_tokens == plain.usage.prompt_tokens + n_suffix + 3
    assert fim.usage.completion_tokens == 6
    with pytest.raises(openai.BadRequestError) as info:
        client.completions.create(model="chatml", prompt="x", suffix="y", max_tokens=2)
    assert (info.value.code, info.value.param) == ("unsupported_parameter", "suffix")

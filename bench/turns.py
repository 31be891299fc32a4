"""Requests the scenarios make: measured turns and history building, on each server kind.

Measured turns are streamed (``client.stream_*``) and ban the end-of-turn
token so their length is fixed. Turns that a conversation continues from must
end normally (only then is a stored turn continued warm), so they favour the
end-of-turn token instead; building turns are retried with the next seed in
the rare case one runs to its cap.
"""

from __future__ import annotations

from typing import Any

import httpx

from bench.client import StreamResult, stream_chat, stream_response
from bench.conversation import INSTRUCTIONS, Conversation
from bench.model import MODEL_ID, ascii_only, eos_logit_bias
from bench.servers import Server

# Cap of a reply that must end normally: one it almost never reaches, so each
# turn takes one attempt (retries would take up the server's cache slots).
BUILD_OUTPUT_TOKENS = 400
BAN = -100.0  # end-of-turn banned: a measured turn runs to exactly max_tokens
# End-of-turn favoured: a turn that must end normally (to be continued warm)
# ends after about 25 tokens (7 to 60 seen) rather than a few hundred.
SHORT = 2.0


def _sampling(max_tokens: int, seed: int, eos_bias: float) -> dict[str, Any]:
    """The shared sampling fields (chat completions names); replies are ASCII (see
    ``bench.model.ascii_only``)."""
    bias = {**ascii_only(), **eos_logit_bias(eos_bias)}
    return {"max_tokens": max_tokens, "seed": seed, "logit_bias": bias}


async def sf_continue(
    http: httpx.AsyncClient,
    server: Server,
    previous: str,
    user: str,
    *,
    max_tokens: int,
    seed: int,
    instructions: str = INSTRUCTIONS,
    eos_bias: float = BAN,
) -> StreamResult:
    """A streamed superfluid turn continuing stored response ``previous`` (warm)."""
    sampling = _sampling(max_tokens, seed, eos_bias)
    body = {
        "model": MODEL_ID,
        "previous_response_id": previous,
        "instructions": instructions,
        "input": user,
        "max_output_tokens": sampling.pop("max_tokens"),
        **sampling,
    }
    return await stream_response(http, server.url + "/v1/responses", body, server.headers)


async def sf_whole(
    http: httpx.AsyncClient,
    server: Server,
    conv: Conversation,
    user: str,
    *,
    max_tokens: int,
    seed: int,
    nonce: str = "",
    eos_bias: float = BAN,
) -> StreamResult:
    """A streamed superfluid turn given the whole conversation (no previous_response_id)."""
    sampling = _sampling(max_tokens, seed, eos_bias)
    body = {
        "model": MODEL_ID,
        "instructions": nonce + conv.instructions,
        "input": conv.responses_input(user),
        "max_output_tokens": sampling.pop("max_tokens"),
        **sampling,
    }
    return await stream_response(http, server.url + "/v1/responses", body, server.headers)


async def chat_whole(
    http: httpx.AsyncClient,
    server: Server,
    conv: Conversation,
    user: str,
    *,
    max_tokens: int,
    seed: int,
    nonce: str = "",
    eos_bias: float = BAN,
) -> StreamResult:
    """A streamed chat completion given the whole conversation (any OpenAI-style server)."""
    body = {
        "model": MODEL_ID,
        "messages": conv.chat_messages(user, nonce),
        **_sampling(max_tokens, seed, eos_bias),
        "stream_options": {"include_usage": True},
    }
    return await stream_chat(http, server.url + "/v1/chat/completions", body, server.headers)


async def sf_build_turn(
    http: httpx.AsyncClient, server: Server, conv: Conversation, user: str, seed: int = 0
) -> None:
    """Add a turn that ended normally to ``conv`` on superfluid (stored, continuable)."""
    for attempt in range(seed, seed + 50):
        if conv.response_id is None:
            result = await sf_whole(
                http,
                server,
                conv,
                user,
                max_tokens=BUILD_OUTPUT_TOKENS,
                seed=attempt,
                eos_bias=SHORT,
            )
        else:
            result = await sf_continue(
                http,
                server,
                conv.response_id,
                user,
                max_tokens=BUILD_OUTPUT_TOKENS,
                seed=attempt,
                instructions=conv.instructions,
                eos_bias=SHORT,
            )
        if result.error:
            raise RuntimeError(f"building {conv.name}: {result.error}")
        if result.status == "completed" and result.text.strip():
            conv.add(user, result.text)
            conv.response_id = result.response_id
            conv.tokens = (result.input_tokens or 0) + (result.output_tokens or 0)
            return
    raise RuntimeError(f"building {conv.name}: no seed ended its reply within the cap")


async def chat_build_turn(
    http: httpx.AsyncClient, server: Server, conv: Conversation, user: str, seed: int = 0
) -> StreamResult:
    """A measured turn on a chat server that then joins ``conv`` (its own reply)."""
    result = await chat_whole(
        http, server, conv, user, max_tokens=BUILD_OUTPUT_TOKENS, seed=seed, eos_bias=SHORT
    )
    if result.ok:
        conv.add(user, result.text)
    return result


async def warm_up(http: httpx.AsyncClient, server: Server, kind: str) -> None:
    """One short generation, so the first measured request pays no first-use costs."""
    conv = Conversation("warm-up")
    if kind == "superfluid":
        result = await sf_whole(http, server, conv, "Hello there.", max_tokens=8, seed=1)
    else:
        result = await chat_whole(http, server, conv, "Hello there.", max_tokens=8, seed=1)
    if result.error:
        raise RuntimeError(f"warm-up of {server.name} failed: {result.error}")

"""Responses as the OpenAI API shows them, from the one neutral stored form.

``response_body`` renders any ``StoredResponse`` (running, finished, or read
back from the store, whichever protocol created it): the neutral facts, and the
request's echoed parameters, with OpenAI's defaults where the creating request
said nothing (or was an LMSP request).
"""

from __future__ import annotations

from typing import Any

from jupyter_superfluid.generation.stored import StoredResponse
from jupyter_superfluid.store import ResponseRecord

# Echoed request parameters and their values when a request did not set them.
ECHO_DEFAULTS: dict[str, Any] = {
    "instructions": None,
    "tools": [],
    "tool_choice": "auto",
    "text": {"format": {"type": "text"}},
    "max_output_tokens": None,
    "max_tool_calls": None,
    "reasoning": {"effort": None, "summary": None},
    "metadata": {},
    "parallel_tool_calls": True,
    "truncation": "disabled",
    "top_logprobs": 0,
    "presence_penalty": 0.0,
    "frequency_penalty": 0.0,
    "service_tier": "default",
    "safety_identifier": None,
    "prompt_cache_key": None,
    "user": None,
}
DEFAULT_SAMPLING = {"temperature": 1.0, "top_p": 1.0}


def usage_body(resp: StoredResponse) -> dict[str, Any] | None:
    """The Responses usage object."""
    u = resp.usage
    if u is None:
        return None
    return {
        "input_tokens": u.input_tokens,
        "input_tokens_details": {
            "cached_tokens": u.cached_tokens,
            "cache_write_tokens": u.input_tokens - u.cached_tokens,
        },
        "output_tokens": u.output_tokens,
        "output_tokens_details": {"reasoning_tokens": u.reasoning_tokens},
        "total_tokens": u.total_tokens,
    }


def response_body(resp: StoredResponse) -> dict[str, Any]:
    """The response object of ``resp`` in OpenAI's shape."""
    echo = resp.echo if resp.protocol == "openai" else {}
    body: dict[str, Any] = {
        "id": resp.id,
        "object": "response",
        "created_at": resp.created_at,
        "completed_at": resp.completed_at,
        "status": resp.status,
        "model": resp.model,
        "previous_response_id": resp.previous_response_id,
        "store": resp.store,
        "background": bool(echo.get("background", False)),
        "error": _error(resp),
        "incomplete_details": {"reason": resp.incomplete_reason}
        if resp.incomplete_reason
        else None,
        "output": [dict(item) for item in resp.output],
        "usage": usage_body(resp),
    }
    for key, default in ECHO_DEFAULTS.items():
        body[key] = echo.get(key, default)
    if "conversation" in echo:  # created in a conversation: which one
        body["conversation"] = echo["conversation"]
    for key, default in DEFAULT_SAMPLING.items():
        value = resp.sampling.get(key)
        body[key] = default if value is None else value
    return body


def _error(resp: StoredResponse) -> dict[str, Any] | None:
    if not resp.error:
        return None
    return {
        "code": resp.error.get("code") or "server_error",
        "message": resp.error.get("message") or "generation failed",
    }


def listed_response(record: ResponseRecord) -> dict[str, Any]:
    """A stored response in a listing (an extension): where it sits in its tree, and a preview."""
    return {
        "id": record.id,
        "object": "response",
        "created_at": int(record.created_at),
        "model": record.model,
        "status": record.status,
        "previous_response_id": record.previous_response_id,
        "cached_tokens": record.cached_tokens,
        "preview": record.preview,
    }

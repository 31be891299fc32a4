"""Stored responses as the OpenAI API shows them, whichever protocol created them (one store)."""

from __future__ import annotations

from typing import Any

from ..sessions import ResponseRecord


def openai_item(item: dict[str, Any]) -> dict[str, Any]:
    """An output item in OpenAI's shape (LMSP's items are a subset of it)."""
    kind = item.get("type")
    status = item.get("status", "completed")
    if kind == "message":
        parts = [
            {"type": "output_text", "text": p.get("text", ""), "annotations": [], "logprobs": []}
            for p in item.get("content", [])
        ]
        return {
            "id": item["id"],
            "type": "message",
            "role": "assistant",
            "status": status,
            "content": parts,
        }
    if kind == "reasoning":
        parts = item.get("content") or item.get("summary") or []
        text = "".join(p.get("text", "") for p in parts)
        return {
            "id": item["id"],
            "type": "reasoning",
            "summary": [],
            "status": status,
            "content": [{"type": "reasoning_text", "text": text}],
        }
    return {**item, "status": status}


def openai_body(rec: ResponseRecord) -> dict[str, Any]:
    """The response object of a stored record, in OpenAI's shape."""
    if rec.protocol == "openai":
        return dict(rec.body)
    body = rec.body
    usage = body.get("usage") or {}
    inputs, outputs = usage.get("input_tokens", 0), usage.get("output_tokens", 0)
    return {
        "id": rec.id,
        "object": "response",
        "created_at": int(rec.created_at),
        "status": rec.status,
        "model": rec.model,
        "previous_response_id": rec.previous_response_id,
        "store": True,
        "background": False,
        "error": body.get("error"),
        "incomplete_details": body.get("incomplete_details"),
        "output": [openai_item(i) for i in body.get("output", [])],
        "usage": {
            "input_tokens": inputs,
            "input_tokens_details": {
                "cached_tokens": rec.cached_tokens,
                "cache_write_tokens": inputs - rec.cached_tokens,
            },
            "output_tokens": outputs,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": inputs + outputs,
        },
        "instructions": None,
        "tools": [],
        "tool_choice": "auto",
        "parallel_tool_calls": True,
        "temperature": None,
        "top_p": None,
        "max_output_tokens": None,
        "metadata": {},
        "text": {"format": {"type": "text"}},
        "truncation": "disabled",
        "reasoning": {"effort": None, "summary": None},
        "user": None,
    }

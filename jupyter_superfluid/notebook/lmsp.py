"""One ``%%respond --lmsp`` round: ``POST /lmsp/v1/responses`` with httpx (LMSP 1.0, §6).

LMSP differs from the OpenAI shape in what is sent (input is always a list of items,
instructions become a leading system message, structured output is
``response_format``, ``store`` defaults to false) and in its stream (SSE ``id`` counts
from 1, every event's data carries ``response_id``, the final event carries status and
usage but not the output). Events are handed on as OpenAI-style dicts (``type`` is the
SSE event name) and the final response is assembled from the items that completed.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping
from typing import Any

from jupyter_superfluid.notebook.transport import Cancelled, EventSink, RoundFailed

LMSP_VERSION = "1.0"
FINAL = ("response.completed", "response.incomplete", "response.failed", "response.cancelled")


class LmspError(RuntimeError):
    """An LMSP problem document (RFC 9457) answered instead of a response."""

    def __init__(self, status: int, code: str | None, detail: str) -> None:
        super().__init__(f"{status} {code or 'error'}: {detail}")
        self.status, self.code, self.detail = status, code, detail


def lmsp_body(params: Mapping[str, Any], *, stream: bool) -> dict[str, Any]:
    """An LMSP request body from Responses parameters."""
    items = _items(params.get("input"))
    if params.get("instructions"):
        items.insert(0, _message("system", str(params["instructions"])))
    body: dict[str, Any] = {"model": params.get("model"), "input": items, "stream": stream}
    body["store"] = True  # LMSP defaults to false; the notebook continues conversations
    for key in ("previous_response_id", "max_output_tokens", "temperature", "tools"):
        if params.get(key) is not None:
            body[key] = params[key]
    if params.get("tools"):
        body["tool_choice"] = params.get("tool_choice") or "auto"
    fmt = (params.get("text") or {}).get("format")
    if fmt and fmt.get("type") == "json_schema":
        spec = {"name": fmt.get("name", "output"), "schema": fmt.get("schema", {})}
        body["response_format"] = {"type": "json_schema", "json_schema": spec}
    return {k: v for k, v in body.items() if v is not None}


def _message(role: str, text: str) -> dict[str, Any]:
    return {"type": "message", "role": role, "content": [{"type": "input_text", "text": text}]}


def _items(value: Any) -> list[dict[str, Any]]:
    """LMSP input is always a list of items."""
    if isinstance(value, str):
        return [_message("user", value)]
    return [dict(item) for item in value or []]


def run_lmsp(
    url: str, api_key: str, params: Mapping[str, Any], *, stream: bool, on_event: EventSink
) -> dict[str, Any]:
    """One LMSP round against ``url`` (``…/lmsp/v1``); the final response as a dict."""
    import httpx

    headers = {"Authorization": f"Bearer {api_key}", "LMSP-Version": LMSP_VERSION}
    body = lmsp_body(params, stream=stream)
    timeout = httpx.Timeout(600.0, connect=10.0)
    with httpx.Client(timeout=timeout, trust_env=False) as http:
        if not stream:
            try:
                r = http.post(url + "/responses", json=body, headers=headers)
            except KeyboardInterrupt:
                raise Cancelled(None) from None
            _check(r)
            final = _normalized(r.json(), params)
            on_event({"type": "response.completed", "response": final, "streamed": False})
            return final
        with http.stream("POST", url + "/responses", json=body, headers=headers) as r:
            if r.status_code >= 400:
                r.read()
                _check(r)
            return _consume(r.iter_lines(), params, on_event)


def _check(r: Any) -> None:
    """Raise ``LmspError`` for a problem document."""
    if r.status_code < 400:
        return
    try:
        problem = r.json()
    except ValueError:
        problem = {"detail": r.text[:200] or r.reason_phrase}
    error = problem.get("error") if isinstance(problem.get("error"), dict) else problem
    detail = error.get("detail") or error.get("message") or error.get("title") or ""
    raise LmspError(r.status_code, error.get("code"), str(detail))


def sse_events(lines: Iterator[str]) -> Iterator[tuple[int | None, str, dict[str, Any]]]:
    """(id, event name, data) for each server-sent event."""
    event_id: int | None = None
    name, data = "message", list[str]()
    for line in lines:
        if not line:
            if data:
                yield event_id, name, json.loads("\n".join(data))
            name, data = "message", []
            continue
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "id":
            event_id = int(value) if value.isdigit() else None
        elif field == "event":
            name = value
        elif field == "data":
            data.append(value)
    if data:
        yield event_id, name, json.loads("\n".join(data))


def _consume(
    lines: Iterator[str], params: Mapping[str, Any], on_event: EventSink
) -> dict[str, Any]:
    """Read the stream to its final event; assemble the response."""
    response_id: str | None = None
    items: dict[int, dict[str, Any]] = {}
    try:
        for event_id, name, data in sse_events(lines):
            response_id = data.get("response_id") or response_id
            if name == "error":
                raise RoundFailed(_problem_text(data.get("error") or data))
            if name == "response.output_item.done":
                items[int(data.get("output_index", len(items)))] = data["item"]
            on_event({"type": name, "sequence_number": event_id, **data})
            if name in FINAL:
                if name == "response.failed":
                    raise RoundFailed(_problem_text(data.get("error") or {}))
                final = {"id": response_id, **data, "output": [items[k] for k in sorted(items)]}
                return _normalized(final, params)
    except KeyboardInterrupt:
        raise Cancelled(response_id) from None
    raise RoundFailed("the LMSP stream ended without a final event")


def _problem_text(problem: Mapping[str, Any]) -> str:
    code = problem.get("code")
    detail = problem.get("detail") or problem.get("title") or "generation failed"
    return f"{code}: {detail}" if code else str(detail)


def _normalized(response: Mapping[str, Any], params: Mapping[str, Any]) -> dict[str, Any]:
    """An LMSP response with the fields the notebook reads, in the OpenAI shape."""
    out = dict(response)
    out.pop("response_id", None)
    out.setdefault("object", "response")
    out.setdefault("created_at", int(time.time()))
    out.setdefault("model", params.get("model"))
    out.setdefault("previous_response_id", params.get("previous_response_id"))
    out.setdefault("output", [])
    return out

"""One request round of ``%%respond``: through the OpenAI SDK, streamed or not.

Every round reports its events to a callback as OpenAI Responses event dicts and
returns the final response (the SDK's ``Response``). A KeyboardInterrupt while it streams closes the
HTTP response, which makes the server cancel the generation (nothing is stored), and
is raised again as ``Cancelled`` carrying the response id.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

EventSink = Callable[[Mapping[str, Any]], None]
FINAL_EVENTS = ("response.completed", "response.incomplete")


class Cancelled(KeyboardInterrupt):
    """The cell was interrupted while streaming; the generation was cancelled."""

    def __init__(self, response_id: str | None) -> None:
        super().__init__(f"generation cancelled ({response_id or 'no response id yet'})")
        self.response_id = response_id


class RoundFailed(RuntimeError):
    """The server reported a failure inside the stream (``error`` / ``response.failed``)."""


def sdk_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """Responses parameters for the SDK: ``seed`` travels in ``extra_body``."""
    out = {k: v for k, v in params.items() if v is not None and k != "seed"}
    if params.get("seed") is not None:
        out["extra_body"] = {"seed": params["seed"]}
    return out


def run_openai(client: Any, params: Mapping[str, Any], *, stream: bool, on_event: EventSink) -> Any:
    """One ``responses.create`` round; the final ``openai`` Response."""
    kwargs = sdk_params(params)
    if not stream:
        try:
            response = client.responses.create(**kwargs)
        except KeyboardInterrupt:
            raise Cancelled(None) from None  # the SDK closed the connection on the way out
        data = response.model_dump(mode="json")
        on_event({"type": "response.completed", "response": data, "streamed": False})
        return response
    response_id: str | None = None
    final: Any = None
    events = client.responses.create(**kwargs, stream=True)
    try:
        for event in events:
            data = event.model_dump(mode="json")
            if data.get("type") == "response.created":
                response_id = data["response"]["id"]
            elif data.get("type") in FINAL_EVENTS:
                final = event.response  # the SDK's typed Response
            elif data.get("type") in ("error", "response.failed"):
                raise RoundFailed(_failure(data))
            on_event(data)
    except KeyboardInterrupt:
        raise Cancelled(response_id) from None
    finally:
        events.close()  # mid-stream this disconnects: the server cancels the generation
    if final is None:
        raise RoundFailed("the stream ended without a final response")
    return final


def _failure(event: Mapping[str, Any]) -> str:
    """The message of an ``error`` or ``response.failed`` event."""
    error = event.get("error") or (event.get("response") or {}).get("error") or event
    code = error.get("code")
    message = error.get("message") or error.get("detail") or "generation failed"
    return f"{code}: {message}" if code else str(message)

"""LMSP problem documents (RFC 9457, ``application/problem+json``).

Every LMSP error, whether raised by the chat path, the store, auth or tornado
itself, is rendered here as ``{type, title, status, detail, code[, param]}``.
The typed errors of ``errors.py`` are shared with the OpenAI layer, so a few of
their codes are translated into LMSP's own vocabulary.
"""

from __future__ import annotations

from typing import Any

from jupyter_superfluid.errors import APIError
from jupyter_superfluid.web.base import HTTP_TITLES

CONTENT_TYPE = "application/problem+json"

# Shared error codes → (LMSP code, status or None to keep the error's own).
_TRANSLATED: dict[str, tuple[str, int | None]] = {
    "invalid_api_key": ("unauthorized", 401),
    "previous_response_not_found": ("response_not_found", None),
    "unsupported_parameter": ("invalid_request", None),
    "unsupported_tool": ("invalid_request", None),
    "unsupported_input": ("unsupported_capability", None),
    "invalid_image": ("invalid_request", None),
    "invalid_audio": ("invalid_request", None),
}


class TaskNotFoundError(APIError):
    """An unknown task, or another principal's (404 ``task_not_found``)."""

    status = 404
    code = "task_not_found"


class EventHistoryExpiredError(APIError):
    """The events asked for are past the retention window (410)."""

    status = 410
    code = "event_history_expired"


class UnsupportedVersion(APIError):
    """An ``LMSP-Version`` this service does not speak (400)."""

    code = "unsupported_version"


class UnsupportedExtension(APIError):
    """An unknown extension marked critical (400)."""

    code = "unsupported_extension"


class IdempotencyKeyReused(APIError):
    """An Idempotency-Key sent again with another body (422)."""

    status = 422
    code = "idempotency_key_reused"


class IdempotencyInProgress(APIError):
    """An Idempotency-Key whose first request is still running (409)."""

    status = 409
    code = "idempotency_in_progress"


def lmsp_error(err: APIError) -> APIError:
    """``err`` with its code (and status) in LMSP's vocabulary."""
    code, status = _TRANSLATED.get(err.code, (err.code, None))
    if code == err.code:
        return err
    return APIError(err.message, param=err.param, code=code, status=status or err.status)


def problem(err: APIError) -> dict[str, Any]:
    """The problem document of ``err``."""
    err = lmsp_error(err)
    doc: dict[str, Any] = {
        "type": "about:blank",
        "title": HTTP_TITLES.get(err.status, "Error"),
        "status": err.status,
        "detail": err.message,
        "code": err.code,
    }
    if err.param:
        doc["param"] = err.param
    return doc


def generation_problem(message: str | None) -> dict[str, Any]:
    """The problem object of a response whose generation failed."""
    err = APIError(message or "generation failed", status=500, code="generation_failed")
    return problem(err)

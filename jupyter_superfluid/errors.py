"""Typed request errors shared by every protocol.

Services raise these; the one base handler (``web.py``) renders them in the
protocol's own error shape (OpenAI's ``{"error": ...}`` or LMSP's RFC 9457
problem document). Nothing here knows about HTTP beyond the status code.
"""

from __future__ import annotations


class APIError(Exception):
    """A client-visible error: status, machine code, message and the field at fault."""

    status = 400
    type = "invalid_request_error"
    code = "invalid_request"
    retry_after: int | None = None  # seconds, sent as Retry-After when set

    def __init__(
        self,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        status: int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        if code is not None:
            self.code = code
        if status is not None:
            self.status = status


class InvalidRequest(APIError):
    """A malformed or out-of-range request (400)."""


class UnsupportedParameter(APIError):
    """A parameter this server does not serve (400 ``unsupported_parameter``)."""

    code = "unsupported_parameter"


class UnsupportedCapability(APIError):
    """The model lacks a capability the request needs (400)."""

    code = "unsupported_capability"


class ContextLengthExceeded(APIError):
    """The request does not fit the model's context window (400)."""

    code = "context_length_exceeded"


class ModelNotFound(APIError):
    """An unknown model id (400 ``model_not_found``)."""

    code = "model_not_found"


class ModelUnavailable(APIError):
    """A known model that cannot be served right now (503), e.g. offline."""

    status = 503
    type = "server_error"
    code = "model_unavailable"


class ModelLoading(APIError):
    """A known model still downloading or loading (503, with ``Retry-After``)."""

    status = 503
    type = "server_error"
    code = "model_loading"

    def __init__(self, message: str, *, retry_after: int) -> None:
        super().__init__(message, param="model")
        self.retry_after = retry_after


class NotFound(APIError):
    """An unknown object (404)."""

    status = 404
    code = "not_found"


class Unauthorized(APIError):
    """Missing or wrong credentials (401)."""

    status = 401
    type = "authentication_error"
    code = "unauthorized"


class Forbidden(APIError):
    """Authenticated but not allowed (403)."""

    status = 403
    type = "permission_error"
    code = "forbidden"


class Conflict(APIError):
    """The request conflicts with the current state (409)."""

    status = 409
    code = "conflict"


class GenerationFailed(APIError):
    """The engine failed while generating (500, a server error, never a crash)."""

    status = 500
    type = "server_error"
    code = "generation_failed"


class EngineUnavailable(APIError):
    """The engine cannot serve now, or went away mid-generation (503, e.g. ``engine_crashed``)."""

    status = 503
    type = "server_error"
    code = "engine_unavailable"


def generation_error(message: str | None, code: str | None = None) -> APIError:
    """The error of a failed generation: 503 when the engine itself failed, else 500."""
    if code is not None:
        return EngineUnavailable(message or "the engine is unavailable", code=code)
    return GenerationFailed(message or "generation failed")

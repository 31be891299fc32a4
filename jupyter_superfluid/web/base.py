"""The one base handler: auth, JSON bodies, error shapes, and server-sent events.

Handlers are written once against ``ProtocolHandler`` and made concrete for
each host by ``concrete_handlers``: on Jupyter they also derive from
jupyter_server's ``APIHandler`` (Jupyter authenticates them); standalone they
check superfluid keys themselves. Each feature's ``routes(...)`` function gives
its handlers only what they use, as URLSpec kwargs, and ``concrete_handlers``
adds the one thing every handler checks first (``Access``: keys and the body
limit), so nothing here reaches for globals or for a bag of services.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from tornado import web

from jupyter_superfluid.errors import APIError, Forbidden, InvalidRequest, Unauthorized
from jupyter_superfluid.validation import json_document
from jupyter_superfluid.web import sse
from jupyter_superfluid.web.answer import Answer
from jupyter_superfluid.web.auth import KeyRing, Principal
from jupyter_superfluid.web.sse import SSE

HTTP_TITLES = {
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    409: "Conflict",
    410: "Gone",
    413: "Payload Too Large",
    415: "Unsupported Media Type",
    422: "Unprocessable Content",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


@dataclass
class Access:
    """What every handler checks before its method runs: the keys and the body limit."""

    keys: KeyRing
    max_request_bytes: int


def openai_error_body(err: APIError) -> dict[str, Any]:
    """OpenAI's error shape."""
    return {
        "error": {"message": err.message, "type": err.type, "param": err.param, "code": err.code}
    }


def status_error(status: int, message: str | None = None) -> APIError:
    """An APIError for a bare HTTP status (tornado's own errors, auth failures)."""
    codes = {
        401: "unauthorized",
        403: "forbidden",
        404: "not_found",
        405: "method_not_allowed",
        413: "request_too_large",
    }
    text = message or HTTP_TITLES.get(status, "error")
    return APIError(text, status=status, code=codes.get(status, "invalid_request"))


def _no_form_parsing() -> None:
    """Stands in for tornado's form-body parsing, which these JSON APIs do not use."""


class ProtocolHandler(web.RequestHandler):
    """Common ground of every superfluid handler, on either host.

    A handler receives its dependencies in ``initialize`` (tornado passes the
    URLSpec kwargs): ``access`` always, then whatever its feature's
    ``routes(...)`` gives it.
    """

    error_style: ClassVar[str] = "openai"
    scope: ClassVar[dict[str, str]] = {}  # method -> LMSP scope needed
    access: Access
    principal: Principal

    def __init__(self, application: Any, request: Any, **kwargs: Any) -> None:
        # Bodies are JSON, read after authentication: tornado's form parsing, which
        # refuses a malformed form body (400) before ``prepare``, is switched off.
        setattr(request, "_parse_body", _no_form_parsing)  # noqa: B010
        super().__init__(application, request, **kwargs)

    # -- auth ---------------------------------------------------------------

    def bearer_token(self) -> str | None:
        """The credential of ``Authorization: Bearer|token X``, if any."""
        header = self.request.headers.get("Authorization", "")
        kind, _, value = header.partition(" ")
        if kind.lower() in ("bearer", "token") and value.strip():
            return value.strip()
        return None

    async def authenticate(self) -> Principal:
        """Who is calling; standalone: a configured key or, with none, anyone."""
        keys = self.access.keys
        token = self.bearer_token()
        if not keys.enabled:
            return keys.anonymous()
        principal = keys.match(token) if token else None
        if principal is None:
            raise Unauthorized(
                "missing or invalid API key (Authorization: Bearer KEY)", code="invalid_api_key"
            )
        return principal

    async def prepare(self) -> None:  # type: ignore[override]
        """Authenticate first (nothing about the request is judged before), then the size."""
        self.principal = await self.authenticate()
        self.check_request()
        needed = self.scope.get(self.request.method or "")
        if needed and not self.principal.has_scope(needed):
            raise Forbidden(f"this key lacks the scope {needed}", code="insufficient_scope")

    def check_request(self) -> None:
        """What an authenticated request is checked for before its method runs: the body size."""
        length = int(self.request.headers.get("Content-Length") or 0)
        limit = self.access.max_request_bytes
        if length > limit:
            raise APIError(
                f"request body of {length} bytes exceeds the limit of {limit}",
                status=413,
                code="request_too_large",
            )

    # -- bodies -------------------------------------------------------------

    def json_body(self) -> dict[str, Any]:
        """The request body as a JSON object, or a 400 naming what is wrong."""
        body = json_document(self.request.body)
        if not isinstance(body, dict):
            raise InvalidRequest("the request body must be a JSON object")
        return body

    def write_json(self, obj: Any, status: int = 200) -> None:
        """Finish with a JSON body."""
        self.set_status(status)
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps(obj))

    # -- errors -------------------------------------------------------------

    def render_error(self, err: APIError) -> None:
        """Write ``err`` in this protocol's error shape (overridden by LMSP)."""
        if err.status == 401:
            self.set_header("WWW-Authenticate", "Bearer")
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps(openai_error_body(err)))

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        """Every error, ours or tornado's, in the protocol's own shape."""
        exc = kwargs.get("exc_info", (None, None, None))[1]
        if isinstance(exc, APIError):
            err = exc
        elif isinstance(exc, web.HTTPError):
            err = status_error(status_code, exc.log_message)
        elif status_code >= 500:
            err = APIError("internal server error", status=status_code, code="internal_error")
            err.type = "server_error"
        else:
            err = status_error(status_code)
        self.clear_header("Content-Type")
        if err.retry_after is not None:
            self.set_header("Retry-After", str(err.retry_after))
        self.render_error(err)

    def _handle_request_exception(self, e: BaseException) -> None:
        # Typed errors carry their own status; tornado would answer 500.
        if isinstance(e, APIError):
            if not self._finished:
                self.send_error(e.status, exc_info=sys.exc_info())
            return
        super()._handle_request_exception(e)

    # -- server-sent events ------------------------------------------------

    async def answer(self, answer: Answer) -> None:
        """Finish with ``answer``: its body as JSON, or its batches through the one SSE pump."""
        if answer.batches is None:
            answer.set_warm(self)
            self.write_json(answer.body, status=answer.status)
            return
        await sse.pump(
            self,
            answer.batches,
            before_first=lambda: answer.set_warm(self),
            on_error=answer.on_error,
            headers_first=answer.headers_first,
        )

    async def pump(
        self,
        batches: AsyncIterator[list[SSE]],
        *,
        warm: Callable[[], int] | None = None,
        on_error: Callable[[APIError], list[SSE]] | None = None,
        headers_first: bool = False,
    ) -> None:
        """Stream ``batches`` as server-sent events (``answer`` with no body)."""
        answer = Answer(batches=batches, warm=warm, on_error=on_error, headers_first=headers_first)
        await self.answer(answer)

    def on_connection_close(self) -> None:
        """Tornado's hook: the client went away."""
        for callback in self.__dict__.get("_on_close", ()):
            callback()
        super().on_connection_close()


JUPYTER_KEY_HELP = (
    "missing or invalid API key: inside Jupyter, the API key is this Jupyter server's token "
    "(Authorization: Bearer <token>), or a superfluid key"
)


class JupyterAuthMixin:
    """Authenticate through Jupyter (token, cookie + XSRF), or a superfluid key."""

    async def authenticate(self) -> Principal:
        """A superfluid key if one matches, else Jupyter's own identity."""
        handler: Any = self
        keys = handler.access.keys
        token = handler.bearer_token()
        principal = keys.match(token) if token and keys.enabled else None
        if principal is not None:
            handler._superfluid_key_auth = True
            handler.current_user = handler._jupyter_current_user = principal.name
            return principal
        try:
            await _jupyter_prepare(handler)
        except web.HTTPError as err:
            if getattr(handler, "_jupyter_current_user", None) is None or _wrong_token(handler):
                raise Unauthorized(JUPYTER_KEY_HELP, code="invalid_api_key") from err
            # Jupyter knows the user (a cookie) but refused the request (XSRF, origin).
            raise Forbidden(err.log_message or "refused by Jupyter") from err
        user = getattr(handler, "_jupyter_current_user", None)
        if user is None or _wrong_token(handler):
            raise Unauthorized(JUPYTER_KEY_HELP, code="invalid_api_key")
        return keys.jupyter_principal(getattr(user, "username", str(user)))

    def check_xsrf_cookie(self) -> None:
        """Key-authenticated requests carry no cookie, so need no XSRF check."""
        handler: Any = self
        if getattr(handler, "_superfluid_key_auth", False):
            return
        super().check_xsrf_cookie()  # type: ignore[misc]

    def finish(self, *args: Any, **kwargs: Any) -> Any:
        """Finish, keeping the Content-Type the handler set (e.g. problem+json)."""
        # jupyter_server's APIHandler.finish forces application/json unless told otherwise.
        handler: Any = self
        current = handler._headers.get("Content-Type") or "application/json"
        kwargs.setdefault("set_content_type", current)
        return super().finish(*args, **kwargs)  # type: ignore[misc]


def _wrong_token(handler: Any) -> bool:
    """An explicit credential that is neither a superfluid key nor Jupyter's token.

    It is a 401 even when the client also carries Jupyter's login cookie (the openai
    SDK keeps the cookie an earlier answer set): the key it was given is wrong.
    """
    if handler.bearer_token() is None or handler.token_authenticated:
        return False
    # With Jupyter's auth off, anyone is let in, whatever credential is sent.
    return bool(getattr(handler.identity_provider, "auth_enabled", True))


async def _jupyter_prepare(handler: Any) -> None:
    from jupyter_server.base.handlers import APIHandler

    result = APIHandler.prepare(handler)
    if asyncio.iscoroutine(result):
        await result


Route = tuple[str, type[ProtocolHandler], dict[str, Any]]
"""A feature's URL pattern, its handler, and the dependencies the handler receives."""


def concrete_handlers(
    routes: list[Route], access: Access, *, jupyter: bool
) -> list[tuple[str, type, dict[str, Any]]]:
    """Tornado URL specs for ``routes``, made concrete for Jupyter or standalone."""
    specs: list[tuple[str, type, dict[str, Any]]] = []
    for pattern, cls, deps in routes:
        concrete: type = cls
        if jupyter:
            from jupyter_server.base.handlers import APIHandler

            concrete = type(cls.__name__, (JupyterAuthMixin, cls, APIHandler), {})
        specs.append((pattern, concrete, {"access": access, **deps}))
    return specs

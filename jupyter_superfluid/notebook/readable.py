"""Errors as one line people can act on, for the magics and the widgets alike."""

from __future__ import annotations

from collections.abc import Mapping

from jupyter_superfluid.notebook.client import ServerNotFound, find_server, forget_server
from jupyter_superfluid.notebook.respond import RespondFailure


def readable(exc: BaseException) -> str | None:
    """One line for errors people can act on; None for bugs (those keep their traceback)."""
    import httpx
    import openai

    from jupyter_superfluid.notebook.lmsp import LmspError
    from jupyter_superfluid.notebook.transport import RoundFailed

    if isinstance(exc, ServerNotFound | RespondFailure | LmspError):
        return str(exc)
    if isinstance(exc, RoundFailed):
        return f"generation failed: {exc}"
    if isinstance(exc, openai.APIConnectionError | httpx.TransportError):
        where = _where()
        forget_server()  # the server may have moved: look again next time
        return f"cannot reach the superfluid server{where}: {exc}"
    if isinstance(exc, openai.APIStatusError):
        body = exc.body if isinstance(exc.body, Mapping) else {}
        message = body.get("message") or exc.message
        code = body.get("code") or exc.code
        return f"{exc.status_code} {code or 'error'}: {message}"
    return None


def _where() -> str:
    """`` at URL`` for messages, when the server's address is known."""
    try:
        return f" at {find_server().base_url}"
    except ServerNotFound:
        return ""

"""``RemoteEngine``: what every remote dialect shares, the HTTP side of the Engine seam.

A dialect (``llama_server``, ``vllm``) subclasses it and says how to read the model's
metadata (``read_model``), how a refusal reads (``refusal``) and what a generation's
request and chunks are (a ``Relay``). Here are the rest:

- one blocking client (model metadata, ``/tokenize``; called from worker threads) and one
  async client per event loop (generations), with their timeouts;
- staleness: after a failure, or every ``props_ttl`` seconds, the model's metadata is
  re-read before the next call, so a remote that went down is served again once it is
  back, and one restarted with another model is noticed (``check_identity``);
- a remote that cannot be reached or fails raises ``EngineUnavailableError`` naming its
  URL (503 above); one lost mid-stream ends the generation with
  ``code="engine_unavailable"``;
- the token ids of prompt texts, cached per text;
- the checks a generation passes before it is sent (as the local engine makes them), and
  the SSE loop that relays its chunks; closing the iterator closes the HTTP stream.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncGenerator, Callable, Sequence
from typing import Any, Protocol

import httpx

from jupyter_superfluid.engine.base import (
    ContextOverflowError,
    EngineError,
    EngineEvent,
    EngineUnavailableError,
    GenerateRequest,
    GenerationFinished,
    MediaError,
    ModelInfo,
)
from jupyter_superfluid.engine.remote.http_stream import StreamClient

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 5.0
CALL_TIMEOUT_S = 30.0  # metadata and tokenizer calls (or the silence timeout if shorter)
DEFAULT_SILENCE_TIMEOUT_S = 300.0  # a generation stream quiet for longer is taken as lost
PROPS_TTL_S = 30.0  # the model's metadata is re-read this often, so a restart is noticed
_CACHED_TEXTS = 2048
_CACHED_TEXT_CHARS = 16384


class Relay(Protocol):
    """Turns one generation's streamed chunks into engine events."""

    started: bool  # PromptEvaluated sent

    async def events(self, chunk: dict[str, Any]) -> list[EngineEvent]:
        """The events of one chunk."""
        ...

    def failed(self, message: str, *, code: str | None) -> GenerationFinished:
        """The last event of a generation that failed."""
        ...


class RemoteEngine:
    """A model served elsewhere over HTTP; ``kind`` names the remote in messages."""

    kind = "remote"
    # Whether a generation's first event may come before its first token, as soon as
    # the remote reports that it took the prompt (llama-server's first progress report):
    # the turn then opens while the remote evaluates. A pool turns it off for its
    # replicas: it fails a generation over to another replica only before its first event.
    opens_before_first_token = True

    def __init__(
        self,
        model_id: str,
        url: str,
        *,
        api_key: str | None = None,
        silence_timeout: float = DEFAULT_SILENCE_TIMEOUT_S,
        props_ttl: float = PROPS_TTL_S,
    ) -> None:
        self.url = url.rstrip("/")
        self._id = model_id
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        call = min(CALL_TIMEOUT_S, silence_timeout)
        self._call_timeout = httpx.Timeout(call, connect=min(CONNECT_TIMEOUT_S, call))
        self._silence_timeout = silence_timeout
        self._client = httpx.Client(
            headers=self._headers, timeout=self._call_timeout, trust_env=False
        )
        self._async: tuple[asyncio.AbstractEventLoop, StreamClient] | None = None
        self._info: ModelInfo | None = None
        self._identity: tuple[Any, ...] | None = None
        self._stale = True  # the metadata must be (re-)read before the next call
        self._props_ttl = props_ttl
        self._read_at = 0.0
        self._refresh_lock = threading.Lock()
        self._texts: OrderedDict[tuple[str, bool], tuple[int, ...]] = OrderedDict()
        self._texts_lock = threading.Lock()
        self._closed = False

    def open(self) -> None:
        """Read the model's metadata now (blocking); close the client if that fails."""
        try:
            self.ensure_current()
        except BaseException:
            self._client.close()  # no async client exists yet
            raise
        log.info("connected %s to %s at %s", self._id, self.kind, self.url)

    @property
    def info(self) -> ModelInfo:
        """The model's metadata, as the remote last described it."""
        assert self._info is not None, "connect() reads the model's metadata"
        return self._info

    def read_model(self) -> ModelInfo:
        """The model's metadata from the remote (blocking); the dialect's own."""
        raise NotImplementedError

    def refusal(self, status: int, content: bytes) -> EngineError:
        """The error of a non-200 answer; by default unavailable (5xx, 404, auth) or refused."""
        if status in (401, 403):
            return EngineUnavailableError(f"{self.kind} at {self.url} refused the key ({status})")
        message = error_message(content)
        if status >= 500 or status == 404:
            self._stale = True
            return EngineUnavailableError(f"{self.kind} at {self.url} answered {status}: {message}")
        return EngineError(f"{self.kind} at {self.url} refused the request: {message}")

    def _current(self) -> bool:
        """Whether the model's metadata needs no re-reading now."""
        return not self._stale and time.monotonic() - self._read_at < self._props_ttl

    def ensure_current(self) -> None:
        """Re-read the metadata after a failure or a while (blocking); raise when down."""
        if self._closed:
            raise EngineError("the engine is closed")
        if self._current():
            return
        with self._refresh_lock:
            if not self._current():
                self._info = self.read_model()
                self._stale, self._read_at = False, time.monotonic()

    def check_identity(self, identity: tuple[Any, ...], served: object) -> None:
        """Refuse a remote that now serves another model than the one first seen."""
        if self._identity is not None and identity != self._identity:
            raise EngineUnavailableError(
                f"{self.kind} at {self.url} now serves another model ({served}): its "
                f"vocabulary or chat template differs from the one {self._id} was served "
                "with; give that model an id of its own"
            )
        self._identity = identity

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """One blocking request; the parsed JSON answer, or the error it amounts to."""
        try:
            response = self._client.request(method, self.url + path, json=body)
        except httpx.HTTPError as err:
            self._stale = True
            raise self.unreachable(err) from err
        if response.status_code != 200:
            raise self.refusal(response.status_code, response.content)
        try:
            return response.json()
        except ValueError as err:
            raise EngineUnavailableError(f"{self.url} answered {path} with no JSON") from err

    def cached_tokens(
        self, text: str, special: bool, fetch: Callable[[], Sequence[int]]
    ) -> list[int]:
        """Token ids of a prompt ``text``: remembered, else ``fetch``ed (blocking)."""
        key = (text, special)
        with self._texts_lock:
            known = self._texts.get(key)
            if known is not None:
                self._texts.move_to_end(key)
                return list(known)
        self.ensure_current()
        tokens = tuple(int(t) for t in fetch())
        if len(text) <= _CACHED_TEXT_CHARS:
            with self._texts_lock:
                self._texts[key] = tokens
                if len(self._texts) > _CACHED_TEXTS:
                    self._texts.popitem(last=False)
        return list(tokens)

    def tokenize_media(self, text: str, media: Sequence[bytes]) -> Any:
        """Media do not cross to a remote engine (its ModelInfo accepts none)."""
        raise MediaError(f"the model {self._id} ({self.kind} at {self.url}) takes no media here")

    def check_request(self, request: GenerateRequest) -> int:
        """The prompt's length, after the local engine's checks (empty, media, no room)."""
        prompt = request.prompt_tokens
        if self._closed:
            raise EngineError("the engine is closed")
        if not prompt:
            raise EngineError("empty prompt")
        if request.media:
            raise MediaError(f"{self.kind} at {self.url}: media input is not supported")
        if request.sampling.max_tokens is not None and request.sampling.max_tokens < 1:
            raise EngineError("max_tokens must be at least 1")
        context = self.info.context_size
        if len(prompt) + 1 > context:
            raise ContextOverflowError(
                f"prompt of {len(prompt)} tokens leaves no room in a {context}-token context",
                prompt_tokens=len(prompt),
                context_size=context,
            )
        return len(prompt)

    async def relay_stream(
        self, path: str, body: dict[str, Any], relay: Relay
    ) -> AsyncGenerator[EngineEvent, None]:
        """POST ``path`` and relay its SSE chunks as events; closing cancels."""
        if not self._current():
            await asyncio.to_thread(self.ensure_current)
        try:
            async with self.async_client().post(path, body) as response:
                if response.status != 200:
                    raise self.refusal(response.status, await response.read())
                finished: GenerationFinished | None = None
                async for line in response.lines():
                    if (
                        finished is not None
                        or not line.startswith("data: ")
                        or line == "data: [DONE]"
                    ):
                        continue  # blank separators, ":" pings, the OpenAI end marker
                    for event in await relay.events(json.loads(line[6:])):
                        if isinstance(event, GenerationFinished):
                            finished = event
                            break
                        yield event
                if finished is not None:
                    # Told once the body is read to its end: a response left unread closes
                    # its connection, and the next turn would open another.
                    yield finished
                    return
        except (httpx.HTTPError, json.JSONDecodeError) as err:
            self._stale = True
            failure = self.unreachable(err)
            if not relay.started:
                raise failure from err
            log.warning("%s", failure)
            yield relay.failed(str(failure), code=failure.code)
            return
        except (EngineUnavailableError, ContextOverflowError):
            raise  # refused before any event: answered as 503 or 400 above
        except EngineError as err:  # the remote refused this request
            if not relay.started:
                raise
            yield relay.failed(str(err), code=None)
            return
        failure = EngineUnavailableError(f"{self.kind} at {self.url} ended the stream early")
        yield relay.failed(str(failure), code=failure.code)

    def async_client(self) -> StreamClient:
        """The streaming client of the running loop (its connections are that loop's)."""
        loop = asyncio.get_running_loop()
        if self._async is None or self._async[0] is not loop:
            client = StreamClient(
                self.url,
                self._headers,
                connect_timeout=CONNECT_TIMEOUT_S,
                read_timeout=self._silence_timeout,
            )
            self._async = (loop, client)
        return self._async[1]

    async def apost(self, path: str, body: dict[str, Any]) -> Any:
        """One call made during a generation (a failure ends that generation)."""
        call = self._call_timeout.read or CALL_TIMEOUT_S
        async with self.async_client().post(path, body, timeout=call) as response:
            content = await response.read()
        if response.status != 200:
            raise httpx.HTTPStatusError(
                f"{path} answered {response.status}",
                request=httpx.Request("POST", self.url + path),
                response=httpx.Response(response.status, content=content),
            )
        return json.loads(content)

    def unreachable(self, err: Exception) -> EngineUnavailableError:
        """The error of a remote that cannot be reached or answered garbage."""
        if isinstance(err, httpx.TimeoutException):
            why = "did not answer in time"
        elif isinstance(err, httpx.HTTPStatusError):
            why = f"answered {err.response.status_code}"
        else:
            why = f"cannot be reached ({type(err).__name__}: {err})"
        return EngineUnavailableError(f"{self.kind} at {self.url} {why}")

    async def close(self) -> None:
        """Close the HTTP clients (the remote keeps running)."""
        self._closed = True
        self._client.close()
        if self._async is not None:
            loop, client = self._async
            self._async = None
            if loop is asyncio.get_running_loop():
                await client.aclose()


def error_message(content: bytes) -> str:
    """The message of an error answer: its JSON ``error.message``, else its text."""
    try:
        doc = json.loads(content)
    except ValueError:
        doc = None
    if isinstance(doc, dict):
        error = doc.get("error")
        found = error.get("message") if isinstance(error, dict) else error
        if found or doc.get("message"):
            return str(found or doc.get("message"))
    return content[:300].decode(errors="replace")

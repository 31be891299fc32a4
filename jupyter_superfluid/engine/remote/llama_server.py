"""``LlamaServerEngine``: llama.cpp's ``llama-server`` behind the Engine seam.

Superfluid renders, tokenizes (``/tokenize``, cached per text; blocking, called from
worker threads) and parses; the remote generates and keeps its own prefix cache:

- Prompts go as exact token ids (``/completion``, ``cache_prompt``), so a continuation
  of a stored conversation shares its prefix with what the remote served last and is
  evaluated warm; ``PromptEvaluated.cached_tokens`` is the remote's own count
  (``timings.cache_n``, sent with the first token).
- Sampling is sent whole (``samplers: [top_p, temperature]``, the local chain), so the
  remote's defaults (top-k, min-p, penalties) never change a model's behaviour.
- Generated ids come from ``return_tokens``. llama-server never sends the id of a token
  that ends inside a UTF-8 character (only ``tokens_predicted`` moves): such a run is
  re-tokenized from the text it completes, the same ids whenever that text tokenizes
  canonically (a multi-byte character split into byte tokens does). Control tokens,
  streamed as empty text, get theirs from ``/detokenize``.
- An unreachable or failing remote raises ``EngineUnavailableError`` naming its URL (503
  above); one lost mid-stream ends the generation with ``code="engine_unavailable"``.
  Nothing stays failed: the next call re-reads ``/props`` and goes on, if the remote
  serves the same vocabulary and template (stored conversations hold its token ids).
- Closing the iterator closes the HTTP stream; llama-server then stops generating.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncGenerator, Sequence
from typing import Any

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
from jupyter_superfluid.engine.remote.llama_completion import CompletionRelay, completion_body

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 5.0
CALL_TIMEOUT_S = 30.0  # /props, /tokenize, /detokenize (or the silence timeout if shorter)
DEFAULT_SILENCE_TIMEOUT_S = 300.0  # a generation stream quiet for longer is taken as lost
PROPS_TTL_S = 30.0  # /props is re-read this often, so a restarted remote is noticed
API_KEY_ENV = "LLAMA_API_KEY"  # the remote's --api-key, when it has one
_CACHED_TEXTS = 2048
_CACHED_TEXT_CHARS = 16384


class LlamaServerEngine:
    """A model that a running ``llama-server`` serves, reached over HTTP."""

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
        key = api_key if api_key is not None else os.environ.get(API_KEY_ENV)
        self._headers = {"Authorization": f"Bearer {key}"} if key else {}
        call = min(CALL_TIMEOUT_S, silence_timeout)
        self._call_timeout = httpx.Timeout(call, connect=min(CONNECT_TIMEOUT_S, call))
        self._stream_timeout = httpx.Timeout(silence_timeout, connect=CONNECT_TIMEOUT_S, pool=None)
        self._client = httpx.Client(headers=self._headers, timeout=self._call_timeout)
        self._async: tuple[asyncio.AbstractEventLoop, httpx.AsyncClient] | None = None
        self._info: ModelInfo | None = None
        self._identity: tuple[Any, ...] | None = None
        self._stale = True  # /props must be (re-)read before the next call
        self._props_ttl = props_ttl
        self._read_at = 0.0
        self._refresh_lock = threading.Lock()
        self._texts: OrderedDict[tuple[str, bool], tuple[int, ...]] = OrderedDict()
        self._texts_lock = threading.Lock()
        self._special: dict[int, str] = {}
        self._closed = False

    @classmethod
    def connect(cls, model_id: str, url: str, **options: Any) -> LlamaServerEngine:
        """An engine for the model served at ``url`` (blocking: reads ``/props``).

        Raises EngineUnavailableError, naming the URL, when the remote cannot be reached.
        """
        engine = cls(model_id, url, **options)
        try:
            engine._ensure_current()
        except BaseException:
            engine._client.close()  # no async client exists yet
            raise
        log.info("connected %s to llama-server at %s", model_id, engine.url)
        return engine

    @property
    def info(self) -> ModelInfo:
        """The model's metadata, as the remote last described it."""
        assert self._info is not None, "connect() reads the model's metadata"
        return self._info

    def _current(self) -> bool:
        """Whether the model's metadata needs no re-reading now."""
        return not self._stale and time.monotonic() - self._read_at < self._props_ttl

    def _ensure_current(self) -> None:
        """Re-read ``/props`` after a failure or a while (blocking); raise if the remote is down."""
        if self._closed:
            raise EngineError("the engine is closed")
        if self._current():
            return
        with self._refresh_lock:
            if not self._current():
                self._read_model()
                self._stale, self._read_at = False, time.monotonic()

    def _read_model(self) -> None:
        """ModelInfo from ``/props`` and ``/v1/models``; refuse a different vocabulary."""
        try:
            props = self._call("GET", "/props")
            meta = self._call("GET", "/v1/models")["data"][0]["meta"]
            context = int(props["default_generation_settings"]["n_ctx"])
        except (KeyError, IndexError, TypeError, ValueError) as err:
            raise EngineUnavailableError(
                f"{self.url} does not answer as llama-server does (no {err} in /props "
                "or /v1/models)"
            ) from err
        template = props.get("chat_template") or None
        bos, eos = props.get("bos_token", ""), props.get("eos_token", "")
        identity = (meta.get("vocab_type"), meta.get("n_vocab"), bos, eos, template)
        if self._identity is not None and identity != self._identity:
            raise EngineUnavailableError(
                f"llama-server at {self.url} now serves another model "
                f"({props.get('model_path')}): its vocabulary or chat template differs from "
                f"the one {self._id} was served with; give that model an id of its own"
            )
        body = {"content": eos, "add_special": False, "parse_special": True}
        eog = tuple(self._call("POST", "/tokenize", body)["tokens"]) if eos else ()
        self._info = ModelInfo(
            id=self._id,
            path=self.url,
            context_size=context,
            chat_template=template,
            bos_token=bos,
            eos_token=eos,
            eog_token_ids=eog if len(eog) == 1 else (),
            n_vocab=int(meta.get("n_vocab") or 0),
        )
        self._identity = identity

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """One blocking request; the parsed JSON answer, or the error it amounts to."""
        try:
            response = self._client.request(method, self.url + path, json=body)
        except httpx.HTTPError as err:
            self._stale = True
            raise self._unreachable(err) from err
        if response.status_code != 200:
            raise self._refusal(response.status_code, response.content)
        try:
            return response.json()
        except ValueError as err:
            raise EngineUnavailableError(f"{self.url} answered {path} with no JSON") from err

    def tokenize(self, text: str, *, special: bool = True) -> list[int]:
        """Token ids of ``text`` (BOS if the model asks for it), from ``/tokenize`` (blocking)."""
        key = (text, special)
        with self._texts_lock:
            known = self._texts.get(key)
            if known is not None:
                self._texts.move_to_end(key)
                return list(known)
        self._ensure_current()
        body = {"content": text, "add_special": True, "parse_special": special}
        tokens = tuple(self._call("POST", "/tokenize", body)["tokens"])
        if len(text) <= _CACHED_TEXT_CHARS:
            with self._texts_lock:
                self._texts[key] = tokens
                if len(self._texts) > _CACHED_TEXTS:
                    self._texts.popitem(last=False)
        return list(tokens)

    def detokenize(self, tokens: list[int]) -> str:
        """Text of ``tokens``, control tokens rendered, from ``/detokenize`` (blocking)."""
        self._ensure_current()
        return str(self._call("POST", "/detokenize", {"tokens": list(tokens)})["content"])

    def tokenize_media(self, text: str, media: Sequence[bytes]) -> Any:
        """Media do not cross to a remote engine (its ModelInfo accepts none)."""
        raise MediaError(f"the model {self._id} (llama-server at {self.url}) takes no media here")

    def generate(self, request: GenerateRequest) -> AsyncGenerator[EngineEvent, None]:
        """Stream PromptEvaluated, TokenGenerated*, GenerationFinished from the remote.

        Raises at once as the local engine does (empty prompt, no room, media); before
        the first event, EngineUnavailableError when the remote cannot be reached.
        """
        prompt = request.prompt_tokens
        if self._closed:
            raise EngineError("the engine is closed")
        if not prompt:
            raise EngineError("empty prompt")
        if request.media:
            raise MediaError(f"llama-server at {self.url}: media input is not supported")
        if request.sampling.max_tokens is not None and request.sampling.max_tokens < 1:
            raise EngineError("max_tokens must be at least 1")
        context = self.info.context_size
        if len(prompt) + 1 > context:
            raise ContextOverflowError(
                f"prompt of {len(prompt)} tokens leaves no room in a {context}-token context",
                prompt_tokens=len(prompt),
                context_size=context,
            )
        return self._stream(completion_body(request), len(prompt))

    async def _stream(
        self, body: dict[str, Any], n_prompt: int
    ) -> AsyncGenerator[EngineEvent, None]:
        """POST ``/completion`` and relay its chunks as events; closing cancels."""
        if not self._current():
            await asyncio.to_thread(self._ensure_current)
        relay = CompletionRelay(self, n_prompt)
        try:
            async with self._async_client().stream(
                "POST", self.url + "/completion", json=body, timeout=self._stream_timeout
            ) as response:
                if response.status_code != 200:
                    raise self._refusal(response.status_code, await response.aread())
                async for line in response.aiter_lines():
                    if not line.startswith("data: "):
                        continue  # blank separators and ":" pings
                    for event in await relay.events(json.loads(line[6:])):
                        yield event
                        if isinstance(event, GenerationFinished):
                            return
        except (httpx.HTTPError, json.JSONDecodeError) as err:
            self._stale = True
            failure = self._unreachable(err)
            if not relay.started:
                raise failure from err
            log.warning("%s", failure)
            yield relay.failed(str(failure), code=failure.code)
            return
        except (EngineUnavailableError, ContextOverflowError):
            raise  # refused before any event: answered as 503 or 400 above
        except EngineError as err:  # the remote refused this request
            yield relay.failed(str(err), code=None)
            return
        failure = EngineUnavailableError(f"llama-server at {self.url} ended the stream early")
        yield relay.failed(str(failure), code=failure.code)

    def _async_client(self) -> httpx.AsyncClient:
        """The async client of the running loop (a loop of its own per client)."""
        loop = asyncio.get_running_loop()
        if self._async is None or self._async[0] is not loop:
            limits = httpx.Limits(max_connections=None, max_keepalive_connections=32)
            self._async = (loop, httpx.AsyncClient(headers=self._headers, limits=limits))
        return self._async[1]

    async def special_text(self, token: int) -> str:
        """The text of a control token, which llama-server streams as empty (cached)."""
        if token not in self._special:
            answer = await self._apost("/detokenize", {"tokens": [token]})
            self._special[token] = str(answer["content"])
        return self._special[token]

    async def retokenize(self, text: str) -> list[int]:
        """Token ids of generated ``text`` (no BOS), from ``/tokenize``."""
        body = {"content": text, "add_special": False, "parse_special": True}
        return [int(t) for t in (await self._apost("/tokenize", body))["tokens"]]

    async def _apost(self, path: str, body: dict[str, Any]) -> Any:
        """One call made during a generation (a failure ends that generation)."""
        client = self._async_client()
        response = await client.post(self.url + path, json=body, timeout=self._call_timeout)
        response.raise_for_status()
        return response.json()

    def _unreachable(self, err: Exception) -> EngineUnavailableError:
        """The error of a remote that cannot be reached or answered garbage."""
        if isinstance(err, httpx.TimeoutException):
            why = "did not answer in time"
        elif isinstance(err, httpx.HTTPStatusError):
            why = f"answered {err.response.status_code}"
        else:
            why = f"cannot be reached ({type(err).__name__}: {err})"
        return EngineUnavailableError(f"llama-server at {self.url} {why}")

    def _refusal(self, status: int, content: bytes) -> EngineError:
        """The error of a non-200 answer: unavailable (5xx, auth), overflow, or refused."""
        try:
            error = json.loads(content).get("error", {})
        except (ValueError, AttributeError):
            error = {}
        message = str(error.get("message") or content[:200].decode(errors="replace"))
        if error.get("type") == "exceed_context_size_error":
            return ContextOverflowError(
                message,
                prompt_tokens=int(error.get("n_prompt_tokens", 0)),
                context_size=int(error.get("n_ctx", 0)),
            )
        if status in (401, 403):
            return EngineUnavailableError(
                f"llama-server at {self.url} refused the key ({status}): set {API_KEY_ENV} "
                "to its --api-key"
            )
        if status >= 500 or status == 404:
            self._stale = True
            return EngineUnavailableError(
                f"llama-server at {self.url} answered {status}: {message}"
            )
        return EngineError(f"llama-server at {self.url} refused the request: {message}")

    async def close(self) -> None:
        """Close the HTTP clients (the remote keeps running)."""
        self._closed = True
        self._client.close()
        if self._async is not None:
            loop, client = self._async
            self._async = None
            if loop is asyncio.get_running_loop():
                await client.aclose()

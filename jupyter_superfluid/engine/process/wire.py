"""What crosses between the server and an engine process: messages and their framing.

Every message is a tuple of plain values (its first item a short tag), serialized
with ``marshal`` (the fastest codec of plain values in CPython, and both ends run
the same interpreter) behind a 4-byte big-endian length. Token ids travel as
packed int32 arrays.

Control channel (one socket, read by the server's event loop):

- server → engine: ``("load", model_id, path, options)``, ``("gen", rid, request)``,
  ``("cancel", rid)``, ``("close",)``.
- engine → server: ``("ready", info, pid)``, ``("load_failed", error)``,
  ``("ev", events, stats)``: the events of one worker step for every generation
  in one frame (tokens may wait for the next steps' up to the stream interval,
  ``child.py``), with the engine's counters when they changed, and
  ``("hb", steps)``: the heartbeat, with the worker's steps so far, sent every
  period while generations are in flight (``watchdog.py``).

Call channels (a few blocking sockets, one call at a time each): ``("tok", text,
special)``, ``("detok", tokens)``, ``("media", text, media)`` answered by
``("ok", value)`` or ``("err", error)``.
"""

from __future__ import annotations

import dataclasses
import marshal
import socket
import struct
from array import array
from collections.abc import Iterable, Sequence
from typing import Any

from jupyter_superfluid.engine.base import (
    ContextOverflowError,
    EngineError,
    EngineEvent,
    EngineUnavailableError,
    GenerateRequest,
    GenerationFinished,
    MediaError,
    MediaRef,
    MediaTokens,
    ModelInfo,
    ModelLoadError,
    PromptEvaluated,
    SamplingParams,
    TokenGenerated,
)

HEADER = struct.Struct("!I")
MAX_FRAME = 1 << 30

# Event kinds inside an "ev" frame: (rid, kind, ...).
PROMPT, TOKEN, FINISHED, REFUSED = 0, 1, 2, 3


def frame(message: tuple[Any, ...]) -> bytes:
    """One message, framed."""
    payload = marshal.dumps(message)
    return HEADER.pack(len(payload)) + payload


class FrameReader:
    """Reassembles messages in place from a byte stream read into its buffer.

    For asyncio's buffered protocols: ``space()`` is where the next read goes
    (``recv_into``: no allocation per read), ``advance(n)`` parses what is complete.
    """

    def __init__(self, size: int = 1 << 16) -> None:
        self._buf = bytearray(size)
        self._end = 0  # bytes held, from the start of the buffer

    def space(self) -> memoryview:
        """The free part of the buffer (grown when a frame needs more room)."""
        if self._end == len(self._buf):
            grown = bytearray(2 * len(self._buf))
            grown[: self._end] = self._buf
            self._buf = grown
        return memoryview(self._buf)[self._end :]

    def advance(self, nbytes: int) -> list[Any]:
        """Every message completed by ``nbytes`` more bytes in the buffer."""
        buf, end = self._buf, self._end + nbytes
        out: list[Any] = []
        start = 0
        with memoryview(buf) as view:
            while end - start >= HEADER.size:
                (size,) = HEADER.unpack_from(buf, start)
                if size > MAX_FRAME:
                    raise EngineError(f"engine process sent a frame of {size} bytes")
                stop = start + HEADER.size + size
                if end < stop:
                    break
                out.append(marshal.loads(view[start + HEADER.size : stop]))
                start = stop
            if start:  # keep the incomplete rest at the front (same size: no resize)
                view[: end - start] = view[start:end]
        self._end = end - start
        return out


def send(sock: socket.socket, message: tuple[Any, ...]) -> None:
    """Write one message on a blocking socket."""
    sock.sendall(frame(message))


def receive(sock: socket.socket) -> Any:
    """Read one message from a blocking socket; EOFError when the peer is gone."""
    (size,) = HEADER.unpack(_exactly(sock, HEADER.size))
    if size > MAX_FRAME:
        raise EngineError(f"frame of {size} bytes")
    return marshal.loads(_exactly(sock, size))


def _exactly(sock: socket.socket, size: int) -> bytes:
    buf = bytearray(size)
    view, got = memoryview(buf), 0
    while got < size:
        n = sock.recv_into(view[got:])
        if n == 0:
            raise EOFError("the other end closed the channel")
        got += n
    return bytes(buf)


def pack_tokens(tokens: Iterable[int]) -> bytes:
    """Token ids as packed int32 (media placeholders are negative)."""
    return array("i", tokens).tobytes()


def unpack_tokens(data: bytes) -> tuple[int, ...]:
    """The inverse of ``pack_tokens``."""
    tokens = array("i")
    tokens.frombytes(data)
    return tuple(tokens)


def request_to_wire(request: GenerateRequest) -> tuple[Any, ...]:
    """A generation request as plain values."""
    s = request.sampling
    bias = tuple((int(k), float(v)) for k, v in (s.logit_bias or {}).items())
    sampling = (s.temperature, s.top_p, s.seed, s.max_tokens, s.grammar, bias)
    media = tuple((m.key, m.kind, m.n_pos, m.digest) for m in request.media)
    return (
        pack_tokens(request.prompt_tokens),
        sampling,
        pack_tokens(request.cache_suffix),
        media,
        request.retain,
    )


def request_from_wire(data: Sequence[Any]) -> GenerateRequest:
    """The inverse of ``request_to_wire``."""
    prompt, (temperature, top_p, seed, max_tokens, grammar, bias), suffix, media, retain = data
    sampling = SamplingParams(
        temperature, top_p, seed, max_tokens, grammar, dict(bias) if bias else None
    )
    return GenerateRequest(
        unpack_tokens(prompt),
        sampling,
        cache_suffix=unpack_tokens(suffix),
        media=tuple(MediaRef(*m) for m in media),
        retain=bool(retain),
    )


def event_to_wire(rid: int, event: EngineEvent) -> tuple[Any, ...]:
    """One engine event of generation ``rid`` as plain values."""
    if isinstance(event, TokenGenerated):
        return (rid, TOKEN, event.token_id, event.text)
    if isinstance(event, PromptEvaluated):
        return (rid, PROMPT, event.prompt_tokens, event.cached_tokens)
    return (rid, FINISHED, event.reason, event.completion_tokens, event.error, event.code)


def event_from_wire(item: Sequence[Any]) -> EngineEvent | EngineError:
    """The event of an ``ev`` item (its rid dropped); a refusal as the error to raise."""
    kind = item[1]
    if kind == TOKEN:
        return TokenGenerated(item[2], item[3])
    if kind == PROMPT:
        return PromptEvaluated(item[2], item[3])
    if kind == FINISHED:
        return GenerationFinished(item[2], item[3], item[4], item[5])
    return error_from_wire(item[2])


def media_to_wire(prompt: MediaTokens) -> tuple[Any, ...]:
    """A tokenized multimodal prompt as plain values."""
    return pack_tokens(prompt.tokens), tuple(dataclasses.astuple(m) for m in prompt.media)


def media_from_wire(data: Sequence[Any]) -> MediaTokens:
    """The inverse of ``media_to_wire``."""
    tokens, media = data
    return MediaTokens(unpack_tokens(tokens), tuple(MediaRef(*m) for m in media))


def info_to_wire(info: ModelInfo) -> dict[str, Any]:
    """Model metadata as plain values."""
    return dataclasses.asdict(info)


def info_from_wire(data: dict[str, Any]) -> ModelInfo:
    """The inverse of ``info_to_wire``."""
    fim = data.get("fim_tokens")
    fim_tokens = (fim[0], fim[1], fim[2]) if fim else None
    return ModelInfo(
        **{**data, "eog_token_ids": tuple(data["eog_token_ids"]), "fim_tokens": fim_tokens}
    )


def error_to_wire(err: BaseException) -> tuple[str, str, dict[str, Any]]:
    """An engine error as (class name, message, attributes); others become EngineError."""
    message = str(err)
    if isinstance(err, ContextOverflowError):
        extra = {"prompt_tokens": err.prompt_tokens, "context_size": err.context_size}
        return "ContextOverflowError", message, extra
    if isinstance(err, MediaError):
        return "MediaError", message, {"index": err.index}
    if isinstance(err, EngineUnavailableError):
        return "EngineUnavailableError", message, {"code": err.code}
    if isinstance(err, ModelLoadError):
        return "ModelLoadError", message, {}
    if isinstance(err, EngineError):
        return "EngineError", message, {}
    return "EngineError", f"{type(err).__name__}: {message}", {}


_ERRORS: dict[str, type[EngineError]] = {
    "EngineError": EngineError,
    "ModelLoadError": ModelLoadError,
    "MediaError": MediaError,
    "ContextOverflowError": ContextOverflowError,
    "EngineUnavailableError": EngineUnavailableError,
}


def error_from_wire(data: Sequence[Any]) -> EngineError:
    """The exception ``error_to_wire`` described."""
    name, message, extra = data
    return _ERRORS.get(name, EngineError)(message, **extra)

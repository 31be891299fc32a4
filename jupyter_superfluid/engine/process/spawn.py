"""One engine process, seen from the server: started, read, watched, described when it dies.

``EngineProcess.spawn`` starts ``child.py`` with a control socket and a few call
sockets (``wire.py``), sends it the model to load and waits until it is ready.
The control socket is read by the event loop (an asyncio protocol): each frame
holds the events of one engine step (of a few, when a stream's tokens waited for
the stream interval), dispatched to the generations in flight, whose consumers
each wake once per frame. Calls (tokenize, ...) use the call
sockets from worker threads, one call per socket at a time.

The process's stderr (its log, and a crash's last words: a fatal signal's
tracebacks from ``faulthandler``, a GGML assert) is re-logged here and its tail
kept, so that when the process dies every generation in flight ends at once with
``engine_crashed`` and a message naming the exit signal and those lines. A process
that lives but makes no progress is killed by its watchdog (``watchdog.py``), and
ends the same way, its message saying so.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import queue
import signal
import socket
import sys
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from jupyter_superfluid.engine.base import (
    GenerateRequest,
    GenerationFinished,
    ModelInfo,
    ModelLoadError,
)
from jupyter_superfluid.engine.process import wire
from jupyter_superfluid.engine.process.exits import exit_status, quoted_lines
from jupyter_superfluid.engine.process.stream import Stream
from jupyter_superfluid.engine.process.watchdog import DEFAULT_WATCH, Sample, Watch, Watchdog

log = logging.getLogger("jupyter_superfluid.engine.process")

CHILD_MODULE = "jupyter_superfluid.engine.process.child"
CALL_CHANNELS = 4
CLOSE_TIMEOUT_S = 10.0
LOG_LINES_KEPT = 200


class ChannelLost(Exception):
    """A call's channel broke: its engine process is gone."""


class _Control(asyncio.BufferedProtocol):
    """The event loop's end of the control socket (read into one buffer, no copies)."""

    def __init__(self, owner: EngineProcess) -> None:
        self.owner = owner
        self.frames = wire.FrameReader()

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.frames.space()

    def buffer_updated(self, nbytes: int) -> None:
        for message in self.frames.advance(nbytes):
            self.owner.on_message(message)

    def connection_lost(self, exc: Exception | None) -> None:
        self.owner.on_disconnect()


ExitCallback = Callable[["EngineProcess", str], None]


class EngineProcess:
    """A started engine process: its sockets, its generations in flight, its log."""

    def __init__(
        self, model_id: str, process: asyncio.subprocess.Process, watch: Watch = DEFAULT_WATCH
    ) -> None:
        self.model_id = model_id
        self.process = process
        self.pid = process.pid
        self.info: ModelInfo | None = None
        self.stats: dict[str, object] = {}
        self.streams: dict[int, Stream] = {}
        self.log_tail: deque[str] = deque(maxlen=LOG_LINES_KEPT)
        self.dead = False  # its exit has been seen
        self.lost = False  # a call channel broke: it is exiting
        self.closing = False
        self.stalled: str | None = None  # why the watchdog killed it
        self.on_exit: ExitCallback | None = None
        self.frames = 0  # "ev" frames received (each is a step's)
        self.beats = 0  # heartbeats received
        self.steps = 0  # the worker's steps, as the last heartbeat said
        self.watchdog = Watchdog(watch, self._progress, self.kill_stalled)
        self._transport: asyncio.Transport | None = None
        self._calls: queue.SimpleQueue[socket.socket] = queue.SimpleQueue()
        self._next_rid = 0
        self._log_task: asyncio.Task[None] | None = None
        self._watch_task: asyncio.Task[None] | None = None
        loop = asyncio.get_running_loop()
        self._ready: asyncio.Future[None] = loop.create_future()
        self.exited: asyncio.Future[int] = loop.create_future()

    @classmethod
    async def spawn(
        cls,
        model_id: str,
        path: Path,
        options: dict[str, Any],
        watch: Watch = DEFAULT_WATCH,
        stream_interval: float = 0.0,
    ) -> EngineProcess:
        """Start a process that loads ``path``; it once ready. Raises what the load raised.

        ``stream_interval``: seconds a generation's tokens may wait to share a frame.
        """
        loop = asyncio.get_running_loop()
        control, child_control = socket.socketpair()
        pairs = [socket.socketpair() for _ in range(CALL_CHANNELS)]
        fds = [child_control.fileno(), *(child.fileno() for _, child in pairs)]
        try:
            process = await asyncio.create_subprocess_exec(
                *_command(fds, watch.beat, stream_interval),
                pass_fds=fds,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                env=_child_env(),
            )
        except OSError as err:
            control.close()
            raise ModelLoadError(f"cannot start an engine process for {model_id}: {err}") from err
        finally:
            child_control.close()
            for _, child in pairs:
                child.close()
        self = cls(model_id, process, watch)
        for ours, _ in pairs:
            ours.settimeout(watch.call_timeout)
            self._calls.put(ours)
        self._log_task = loop.create_task(self._read_log())
        self._watch_task = loop.create_task(self._watch())
        self._transport, _ = await loop.create_unix_connection(lambda: _Control(self), sock=control)
        self.send(("load", model_id, str(path), _plain(options)))
        try:
            await self._ready
        except BaseException:
            await self.close()
            raise
        return self

    # -- the control channel -------------------------------------------------

    def send(self, message: tuple[Any, ...]) -> None:
        """Queue a message to the process (event loop thread)."""
        transport = self._transport
        if transport is not None and not transport.is_closing():
            transport.write(wire.frame(message))

    def on_message(self, message: tuple[Any, ...]) -> None:
        """Dispatch one frame from the process."""
        tag = message[0]
        if tag == "ev":
            self.frames += 1
            if message[2] is not None:
                self.stats = message[2]
            streams = self.streams
            for item in message[1]:
                stream = streams.get(item[0])
                if stream is not None:
                    if item[1] == wire.TOKEN:
                        stream.tokens += 1
                    elif item[1] != wire.PROMPT:  # finished, or refused
                        stream.ended = True
                    stream.push(wire.event_from_wire(item))
        elif tag == "hb":
            self.beats += 1
            self.steps = message[1]
        elif tag == "ready":
            self.info = wire.info_from_wire(message[1])
            if not self._ready.done():
                self._ready.set_result(None)
        elif tag == "load_failed" and not self._ready.done():
            self._ready.set_exception(wire.error_from_wire(message[1]))

    def on_disconnect(self) -> None:
        """The control socket closed: the process is exiting; make sure it does."""
        if self.process.returncode is None:
            asyncio.get_running_loop().call_later(CLOSE_TIMEOUT_S, self._kill)

    @property
    def gone(self) -> bool:
        """Whether the process exited or is exiting."""
        return self.dead or self.lost

    def open(self, request: GenerateRequest) -> tuple[int, Stream]:
        """Start a generation; its id and the stream its events arrive on."""
        if self.dead:
            raise ChannelLost
        self._next_rid += 1
        rid, stream = self._next_rid, Stream()
        self.streams[rid] = stream
        self.send(("gen", rid, wire.request_to_wire(request)))
        self.watchdog.arm()
        return rid, stream

    def release(self, rid: int, *, cancel: bool) -> None:
        """Forget generation ``rid``, cancelling it in the process if it still runs."""
        if self.streams.pop(rid, None) is not None and cancel:
            self.send(("cancel", rid))

    # -- blocking calls (any thread) -----------------------------------------

    def call(self, message: tuple[Any, ...]) -> Any:
        """One request/response on a free call channel; ChannelLost if the process died."""
        sock = self._take_channel()
        try:
            wire.send(sock, message)
            reply = wire.receive(sock)
        except (OSError, EOFError) as err:
            sock.close()
            self.lost = True  # the process never closes a channel: it is gone
            if isinstance(err, TimeoutError):  # hung: end it, so that it is restarted
                waited = self.watchdog.watch.call_timeout
                name = _CALL_NAMES.get(message[0], message[0])
                self.kill_stalled(
                    f"stopped making progress for {waited:.1f} s (a {name} call went unanswered)"
                )
            raise ChannelLost from err
        self._calls.put(sock)
        if reply[0] == "ok":
            return reply[1]
        raise wire.error_from_wire(reply[1])

    # -- stalls ---------------------------------------------------------------

    def _progress(self) -> Sample | None:
        """What the watchdog looks at: None unless generations wait on this process."""
        if self.gone or self.closing or all(s.ended for s in self.streams.values()):
            return None
        return self.frames + self.beats, (self.frames, self.steps)

    def kill_stalled(self, why: str) -> None:
        """End a process that stopped making progress (any thread); its exit does the rest."""
        if self.dead or self.stalled is not None:
            return
        self.stalled, self.lost = why, True
        log.error(
            "superfluid: the engine process of %s (pid %d) %s with %d generation(s) in "
            "flight; killing it",
            *(self.model_id, self.pid, why, sum(not s.ended for s in self.streams.values())),
        )
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)

    def _take_channel(self) -> socket.socket:
        while True:
            if self.gone:
                raise ChannelLost
            try:
                return self._calls.get(timeout=0.25)
            except queue.Empty:
                continue

    # -- the process's life ----------------------------------------------------

    async def _read_log(self) -> None:
        """Re-log the process's output line by line and keep its tail."""
        assert self.process.stdout is not None
        pending = b""
        while True:
            data = await self.process.stdout.read(65536)
            if not data:
                break
            *lines, pending = (pending + data).split(b"\n")
            for line in lines:
                self._log_line(line)
        if pending:
            self._log_line(pending)

    def _log_line(self, raw: bytes) -> None:
        line = raw.decode("utf-8", errors="replace").rstrip()
        if not line:
            return
        self.log_tail.append(line)
        level = logging.INFO if line.startswith("INFO ") else logging.WARNING
        log.log(level, "engine %s [%d]: %s", self.model_id, self.pid, line)

    async def _watch(self) -> None:
        """Wait for the process to exit; then end everything in flight."""
        code = await self.process.wait()
        self.dead = True
        self.watchdog.disarm()
        with contextlib.suppress(asyncio.TimeoutError):  # the log's last lines, if they come
            if self._log_task is not None:
                await asyncio.wait_for(asyncio.shield(self._log_task), 2.0)
        if self._transport is not None:
            self._transport.close()
        while not self._calls.empty():
            self._calls.get_nowait().close()
        if not self._ready.done():
            self._ready.set_exception(ModelLoadError(self.describe_exit(code, "while loading")))
        reason = self.describe_exit(code)
        self._end_streams(reason)
        self.exited.set_result(code)
        if self.on_exit is not None and not self.closing:
            self.on_exit(self, reason)

    def _end_streams(self, reason: str) -> None:
        """Every generation in flight ends now: cancelled by a close, else crashed."""
        streams, self.streams = self.streams, {}
        for stream in streams.values():
            if self.closing:
                stream.push(GenerationFinished("cancelled", stream.tokens))
            else:
                stream.push(
                    GenerationFinished("error", stream.tokens, error=reason, code="engine_crashed")
                )

    def describe_exit(self, code: int, when: str = "") -> str:
        """How the process ended (``when``: e.g. "while loading"), with its last log lines."""
        how = f"{self.stalled} and was killed" if self.stalled is not None else exit_status(code)
        lines = quoted_lines(list(self.log_tail))
        said = "; its last log lines: " + " | ".join(lines) if lines else "; it logged nothing"
        when = f" {when}" if when else ""
        return f"the engine process of {self.model_id} (pid {self.pid}) {how}{when}{said}"

    def _kill(self) -> None:
        if self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.kill()

    async def close(self) -> None:
        """Ask the process to close its engine and exit; kill it if it does not."""
        self.closing = True
        self.send(("close",))
        try:
            await asyncio.wait_for(asyncio.shield(self.exited), CLOSE_TIMEOUT_S)
        except asyncio.TimeoutError:
            self._kill()
            await self.exited


_CALL_NAMES = {"tok": "tokenize", "detok": "detokenize", "media": "tokenize_media"}


def _command(fds: list[int], heartbeat: float, stream_interval: float) -> list[str]:
    control, *calls = fds
    return [
        sys.executable,
        "-m",
        CHILD_MODULE,
        "--parent",
        str(os.getpid()),
        "--control",
        str(control),
        "--calls",
        ",".join(map(str, calls)),
        "--heartbeat",
        str(heartbeat),
        "--stream-interval",
        str(stream_interval),
    ]


def _child_env() -> dict[str, str]:
    """This environment, with this very package first on the child's path."""
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[3])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    return env


def _plain(options: dict[str, Any]) -> dict[str, Any]:
    """Load options as plain values (paths as text)."""
    return {k: str(v) if isinstance(v, os.PathLike) else v for k, v in options.items()}

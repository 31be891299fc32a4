"""The engine process: ``python -m jupyter_superfluid.engine.process.child``.

It loads one ``LlamaEngine`` and serves it to the server that started it, over the
sockets it inherited (``wire.py``). Threads: the main thread loads the model and
then waits for ``close``; a control thread reads requests (generate, cancel,
close); the engine's worker thread runs the step loop and, after every step,
sends the events of that step in one frame; a few call threads answer the
blocking calls (tokenize, detokenize, tokenize_media); while generations are in
flight, a heartbeat thread sends the worker's step count every period, so that
the server can tell a live process from a stopped or wedged one (``watchdog.py``).

A generation's tokens may wait up to the stream interval and go with the next
steps' in one frame: at one stream on a small model a step takes a few
milliseconds, and each frame costs the server a wake-up, a read and an SSE write.
Every other event (a prompt evaluated, a generation's end, a refusal) sends the
frame at once, with the tokens waiting; a first token comes in the step that
evaluated its prompt, so it goes with ``PromptEvaluated``.

It never outlives the server: when the control socket reaches end of file (the
server exited, however it died) it exits at once, and on Linux the kernel also
sends it SIGKILL when the server's thread that started it ends
(``PR_SET_PDEATHSIG``). Ctrl-C in the server's terminal is the server's to
handle: SIGINT is ignored here.
"""

from __future__ import annotations

import argparse
import ctypes
import faulthandler
import logging
import os
import signal
import socket
import sys
import threading
import time
from typing import Any

from jupyter_superfluid.engine.base import EngineEvent, GenerationFinished, TokenGenerated
from jupyter_superfluid.engine.local.llama import LlamaEngine
from jupyter_superfluid.engine.local.worker import Sequence
from jupyter_superfluid.engine.process import wire

log = logging.getLogger("jupyter_superfluid.engine.process")

PR_SET_PDEATHSIG = 1
STATS_EVERY_S = 0.05


class EngineServer:
    """Serves one loaded engine over the control socket and the call sockets."""

    def __init__(self, control: socket.socket, stream_interval: float = 0.0) -> None:
        self.control = control
        self.stream_interval = stream_interval
        self.engine: LlamaEngine | None = None
        self.ready = threading.Event()
        self.closing = threading.Event()
        self._sequences: dict[int, Sequence] = {}
        self._live: set[int] = set()  # generations that still owe events (heartbeats go)
        self._working = threading.Event()  # set with the first of them
        self.steps = 0  # steps the worker finished (each ends in ``flush``)
        self._outbox: list[tuple[Any, ...]] = []
        self._send_due = False  # the outbox holds an event that goes at once
        self._sent_at = 0.0  # time.monotonic() of the last frame of events
        self._stats: dict[str, object] | None = None
        self._stats_due = True
        self._stats_at = 0.0
        self._lock = threading.Lock()  # the outbox and writes on the control socket

    # -- events: buffered per step, one frame per step or per stream interval --

    def emitter(self, rid: int) -> Any:
        """The ``emit`` callback of generation ``rid`` (called on the worker thread)."""

        def emit(event: EngineEvent) -> bool:
            item = wire.event_to_wire(rid, event)
            finished = isinstance(event, GenerationFinished)
            with self._lock:
                self._outbox.append(item)
                if not isinstance(event, TokenGenerated):
                    self._send_due = True
                if finished:
                    self._live.discard(rid)
            if finished:
                self._sequences.pop(rid, None)
                self._stats_due = True  # a finished generation's counters go with its end
            return True

        return emit

    def counters_moved(self) -> None:
        """The engine's counters changed between steps (a disk write): send them next flush."""
        self._stats_due = True

    def flush(self) -> None:
        """Send what the last steps produced, with the counters when they are due and moved.

        Tokens alone wait while the last frame is younger than the stream
        interval. Counters go with a generation's end, and otherwise at most
        every ``STATS_EVERY_S`` (they cost more than a step's events).
        """
        with self._lock:
            self.steps += 1
            now = time.monotonic()
            if self._outbox and not self._send_due and now < self._sent_at + self.stream_interval:
                return
            self._send_due = False
            events, self._outbox = self._outbox, []
            stats = None
            if self.engine is not None and (self._stats_due or now >= self._stats_at):
                stats = self.engine.stats()
                self._stats_due, self._stats_at = False, now + STATS_EVERY_S
                if stats == self._stats:
                    stats = None
                else:
                    self._stats = stats
            if events or stats:
                self._sent_at = now
                self._send(("ev", events, stats))

    def send(self, message: tuple[Any, ...]) -> None:
        """Send one message now (from any thread)."""
        with self._lock:
            self._send(message)

    def _send(self, message: tuple[Any, ...]) -> None:
        try:
            wire.send(self.control, message)
        except OSError:
            _parent_gone()

    # -- requests ----------------------------------------------------------------

    def serve_control(self) -> None:
        """The control thread: generate, cancel, close; exit when the server is gone."""
        while True:
            try:
                message = wire.receive(self.control)
            except (EOFError, OSError):
                _parent_gone()
            tag = message[0]
            if tag == "gen":
                with self._lock:
                    self._live.add(message[1])
                    self._working.set()
                self._generate(message[1], message[2])
            elif tag == "cancel":
                seq = self._sequences.get(message[1])
                if seq is not None:
                    seq.cancel()
            elif tag == "close":
                self.closing.set()
                return

    def _generate(self, rid: int, data: Any) -> None:
        """Start generation ``rid``, or send why it is refused."""
        assert self.engine is not None
        try:
            seq = self.engine.prepare(wire.request_from_wire(data), self.emitter(rid))
            self._sequences[rid] = seq
            self.engine.submit(seq)
        except Exception as err:
            self._sequences.pop(rid, None)
            with self._lock:
                self._live.discard(rid)
                self._outbox.append((rid, wire.REFUSED, wire.error_to_wire(err)))
                self._send_due = True
            self.flush()

    def beat(self, period: float) -> None:
        """The heartbeat thread: ``("hb", steps)`` every ``period`` s while generations run.

        Its own thread, so that it goes on while the worker is in a long step
        (llama.cpp's calls release the GIL); a stopped process, or a hang that
        holds the GIL, sends nothing, which the server's watchdog sees as well.
        """
        while True:
            self._working.wait()
            time.sleep(period)
            with self._lock:
                if not self._live:
                    self._working.clear()  # idle: no heartbeats until the next generation
                    continue
                self._send(("hb", self.steps))

    def serve_calls(self, sock: socket.socket) -> None:
        """A call thread: answer blocking calls one at a time until the server closes it."""
        self.ready.wait()
        while True:
            try:
                message = wire.receive(sock)
            except (EOFError, OSError):
                return
            try:
                reply: tuple[Any, ...] = ("ok", self._call(message))
            except Exception as err:
                reply = ("err", wire.error_to_wire(err))
            try:
                wire.send(sock, reply)
            except OSError:
                return

    def _call(self, message: tuple[Any, ...]) -> Any:
        engine = self.engine
        assert engine is not None
        tag = message[0]
        if tag == "tok":
            return wire.pack_tokens(engine.tokenize(message[1], special=message[2]))
        if tag == "detok":
            return engine.detokenize(list(wire.unpack_tokens(message[1])))
        if tag == "media":
            return wire.media_to_wire(engine.tokenize_media(message[1], list(message[2])))
        raise ValueError(f"unknown call {tag!r}")


def _parent_gone() -> Any:
    """The server is gone: leave now, whatever the engine is doing."""
    os._exit(0)


def _die_with_parent(parent_pid: int) -> None:
    """Ask the kernel for SIGKILL when the server goes; leave if it is gone already."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent_pid:
        _parent_gone()


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="A superfluid engine process.")
    parser.add_argument("--parent", type=int, required=True, help="the server's pid")
    parser.add_argument("--control", type=int, required=True, help="control socket fd")
    parser.add_argument("--calls", default="", help="call socket fds, comma separated")
    parser.add_argument("--heartbeat", type=float, default=0.0, help="seconds; 0: none")
    parser.add_argument(
        "--stream-interval", type=float, default=0.0, help="seconds tokens may wait; 0: none"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Load the model named by the first control message and serve it until closed."""
    args = _parse(argv)
    _die_with_parent(args.parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    faulthandler.enable(all_threads=False)  # a crash leaves its traceback in the log
    logging.basicConfig(
        stream=sys.stderr, level=logging.INFO, format="%(levelname)s %(name)s: %(message)s"
    )
    server = EngineServer(socket.socket(fileno=args.control), args.stream_interval)
    calls = [socket.socket(fileno=int(fd)) for fd in args.calls.split(",") if fd]
    try:
        _tag, model_id, path, options = wire.receive(server.control)
    except (EOFError, OSError):
        return 0
    threading.Thread(target=server.serve_control, name="control", daemon=True).start()
    if args.heartbeat > 0:
        beat = threading.Thread(target=server.beat, args=(args.heartbeat,), daemon=True)
        beat.name = "heartbeat"
        beat.start()
    for i, sock in enumerate(calls):
        name = f"calls-{i}"
        threading.Thread(target=server.serve_calls, args=(sock,), name=name, daemon=True).start()
    try:
        engine = LlamaEngine.load(
            model_id, path, after_step=server.flush, on_counters=server.counters_moved, **options
        )
    except Exception as err:
        server.send(("load_failed", wire.error_to_wire(err)))
        return 1
    server.engine = engine
    server.ready.set()
    server.flush()  # the counters, from zero
    server.send(("ready", wire.info_to_wire(engine.info), os.getpid()))
    server.closing.wait()
    engine.close_sync()
    return 0


if __name__ == "__main__":
    sys.exit(main())

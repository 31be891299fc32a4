"""``ProcessEngine``: the Engine seam in the server, with the engine in a process of its own.

The layers above use it exactly as they would use ``LlamaEngine``; only plain
values cross (``wire.py``). ``generate`` streams the events that the engine
process sends once per engine step (a stream's tokens may wait up to the stream
interval and come with the next steps'); the consumer gets every event that is
ready each time it wakes. ``tokenize``, ``detokenize`` and ``tokenize_media`` block on a
call channel (call them from worker threads, as the chat path does).

When the engine process dies, every generation in flight ends at once with
``GenerationFinished(reason="error", code="engine_crashed")`` and a message naming
the exit signal and the process's last log lines; the supervisor starts a new
process, and requests wait for it (``supervisor.py``). A process that stops making
progress (stopped, deadlocked, spinning) for ``stall_timeout`` seconds while
generations are in flight is killed (``watchdog.py``) and ends them the same way,
the message saying so. Calls that a crash
interrupted are tried once more on the new process; generations are not (they
had sent tokens already).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from pathlib import Path
from typing import Any

from jupyter_superfluid.engine.base import (
    EngineError,
    EngineEvent,
    EngineUnavailableError,
    GenerateRequest,
    GenerationFinished,
    MediaTokens,
    ModelInfo,
)
from jupyter_superfluid.engine.process import wire
from jupyter_superfluid.engine.process.spawn import ChannelLost
from jupyter_superfluid.engine.process.supervisor import (
    RESTART_WAIT_S,
    STREAM_INTERVAL_S,
    Supervisor,
)
from jupyter_superfluid.engine.process.watchdog import STALL_TIMEOUT_S, Watch


class ProcessEngine:
    """A model loaded in a supervised engine process."""

    def __init__(self, supervisor: Supervisor) -> None:
        assert supervisor.info is not None
        self._supervisor = supervisor
        self._info = supervisor.info

    @classmethod
    async def start(
        cls,
        model_id: str,
        path: str | Path,
        *,
        restart_wait: float = RESTART_WAIT_S,
        stall_timeout: float = STALL_TIMEOUT_S,
        heartbeat: float | None = None,
        stream_interval: float = STREAM_INTERVAL_S,
        **options: Any,
    ) -> ProcessEngine:
        """Start the engine process and load the model there; raises what the load raised.

        ``stall_timeout``: seconds without progress before the process is killed
        (0: never); ``heartbeat``: seconds between its heartbeats (None: derived);
        ``stream_interval``: seconds a generation's tokens after its first may wait
        to go to the server together (0: each step's at once).
        """
        watch = Watch(stall_timeout, heartbeat)
        supervisor = Supervisor(
            model_id,
            Path(path),
            options,
            restart_wait=restart_wait,
            watch=watch,
            stream_interval=stream_interval,
        )
        await supervisor.start()
        return cls(supervisor)

    @property
    def info(self) -> ModelInfo:
        """The model's metadata (as the first process loaded it)."""
        return self._info

    @property
    def pid(self) -> int | None:
        """The engine process's pid; None while it restarts."""
        current = self._supervisor.current
        return current.pid if current is not None else None

    def stats(self) -> dict[str, Any]:
        """The engine process's counters, its pid and how often it was restarted."""
        return self._supervisor.stats()

    # -- blocking calls --------------------------------------------------------

    def tokenize(self, text: str, *, special: bool = True) -> list[int]:
        """Token ids of ``text`` (blocking)."""
        return list(wire.unpack_tokens(self._call(("tok", text, special))))

    def detokenize(self, tokens: list[int]) -> str:
        """Text of ``tokens`` (blocking)."""
        return str(self._call(("detok", wire.pack_tokens(tokens))))

    def tokenize_media(self, text: str, media: Sequence[bytes]) -> MediaTokens:
        """Tokens of ``text`` with its media encoded in the engine process (blocking)."""
        return wire.media_from_wire(self._call(("media", text, tuple(media))))

    def _call(self, message: tuple[Any, ...]) -> Any:
        """A call on the running process; once more on the next one if it dies meanwhile."""
        for _ in range(2):
            process = self._supervisor.ready_sync()
            try:
                return process.call(message)
            except ChannelLost:
                continue
        raise EngineUnavailableError(
            f"the engine of {self._info.id} went away twice during one call "
            f"({self._supervisor.last_exit})"
        )

    # -- generation ------------------------------------------------------------

    def generate(self, request: GenerateRequest) -> AsyncGenerator[EngineEvent, None]:
        """Stream PromptEvaluated, TokenGenerated*, GenerationFinished from the engine process.

        What the engine refuses (an empty prompt, context overflow, an invalid
        grammar, media it no longer holds) raises at the first iteration;
        closing the iterator cancels the generation before its next token.
        """
        return self._generate(request)

    async def _generate(self, request: GenerateRequest) -> AsyncGenerator[EngineEvent, None]:
        process = await self._supervisor.ready()
        try:
            rid, stream = process.open(request)
        except ChannelLost:  # it died just now: the crash is logged, the restart under way
            raise EngineUnavailableError(f"the engine of {self._info.id} is restarting") from None
        finished = False
        try:
            events = stream.events
            while True:
                if not events:
                    await stream.wait()
                while events:
                    event = events.popleft()
                    if isinstance(event, EngineError):
                        finished = True
                        raise event
                    yield event
                    if isinstance(event, GenerationFinished):
                        finished = True
                        return
        finally:
            process.release(rid, cancel=not finished)

    async def close(self) -> None:
        """Close the engine process (its model's memory is freed) and stop supervising it."""
        await self._supervisor.close()

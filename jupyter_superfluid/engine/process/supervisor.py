"""Keeps one model's engine process running: restarts it, with backoff, when it dies.

The first start is the model's load: its failure is the load's failure. After a
crash the supervisor logs what happened and starts a new process after a delay
that doubles with every crash or failed start that follows a short life (0.25 s
up to 30 s), and goes back to the shortest once a process has lived a minute.

Requests that come while the engine is down wait for the restart, up to
``restart_wait`` seconds; when the last attempt to start failed they are refused
at once (``EngineUnavailableError``, 503 ``engine_unavailable``), never left to
hang. A process that stops making progress is killed by its watchdog
(``watchdog.py``) and restarted like one that crashed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from pathlib import Path
from typing import Any

from jupyter_superfluid.engine.base import EngineError, EngineUnavailableError, ModelInfo
from jupyter_superfluid.engine.process.spawn import EngineProcess
from jupyter_superfluid.engine.process.watchdog import DEFAULT_WATCH, Watch

log = logging.getLogger("jupyter_superfluid.engine.process")

RESTART_WAIT_S = 30.0
# A generation's tokens may wait this long to share a frame: under half of one
# frame of a 60 Hz display, and it halves the server's CPU per token at one
# stream of a small model (bench/README.md).
STREAM_INTERVAL_S = 0.008
STABLE_AFTER_S = 60.0
FIRST_DELAY_S = 0.25
MAX_DELAY_S = 30.0


def backoff(failures: int) -> float:
    """Seconds before the next start after ``failures`` quick failures in a row."""
    return float(min(MAX_DELAY_S, FIRST_DELAY_S * 2**failures))


class Supervisor:
    """Starts, watches and restarts the engine process of one model."""

    def __init__(
        self,
        model_id: str,
        path: Path,
        options: dict[str, Any],
        *,
        restart_wait: float = RESTART_WAIT_S,
        watch: Watch | None = None,
        stream_interval: float = STREAM_INTERVAL_S,
    ) -> None:
        self.model_id = model_id
        self.path = path
        self.options = options
        self.restart_wait = restart_wait
        self.watch = watch or DEFAULT_WATCH
        self.stream_interval = stream_interval
        self.current: EngineProcess | None = None
        self.info: ModelInfo | None = None
        self.state = "starting"  # ready | restarting | closed
        self.restarts = 0
        self.stalls = 0  # processes its watchdog killed
        self.last_exit: str | None = None  # how the last process ended
        self.start_error: str | None = None  # why the last start failed, until one works
        self._failures = 0
        self._since = 0.0
        self._retry_at = 0.0
        self._changed = threading.Condition()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._restart: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Start the first process (the model's load); raises what the load raised."""
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        self._adopt(await self._spawn())

    async def _spawn(self) -> EngineProcess:
        return await EngineProcess.spawn(
            self.model_id, self.path, self.options, self.watch, self.stream_interval
        )

    def _adopt(self, process: EngineProcess) -> None:
        self.info = self.info or process.info
        process.on_exit = self._on_exit
        self.current, self.state, self.start_error = process, "ready", None
        self._since = time.monotonic()
        self._notify()

    def _notify(self) -> None:
        """Wake every waiter (sync and async) to look again."""
        with self._changed:
            self._changed.notify_all()
        if self._wake is not None:
            self._wake.set()
            self._wake = asyncio.Event()

    def _on_exit(self, process: EngineProcess, reason: str) -> None:
        """A process died on its own: log it and schedule its restart."""
        if process is not self.current or self.state == "closed":
            return
        self.stalls += process.stalled is not None
        quick = time.monotonic() - self._since < STABLE_AFTER_S
        self._failures = self._failures + 1 if quick else 0
        delay = backoff(self._failures)
        self.current, self.state, self.last_exit = None, "restarting", reason
        log.error("superfluid: %s; restarting it in %.2f s", reason, delay)
        self._notify()
        assert self._loop is not None
        self._restart = self._loop.create_task(self._restart_after(delay))

    async def _restart_after(self, delay: float) -> None:
        while self.state != "closed":
            self._retry_at = time.monotonic() + delay
            await asyncio.sleep(delay)
            try:
                process = await self._spawn()
            except Exception as err:
                self._failures += 1
                delay = backoff(self._failures)
                self.start_error = str(err)
                log.error(
                    "superfluid: the engine of %s did not start again: %s; next try in %.2f s",
                    *(self.model_id, err, delay),
                )
                self._notify()
                continue
            if self.state == "closed":
                await process.close()
                return
            self.restarts += 1
            self._adopt(process)
            log.info("superfluid: the engine of %s is back (pid %d)", self.model_id, process.pid)
            return

    def _refusal(self) -> EngineError | None:
        """Why a request must not wait, if it must not."""
        if self.state == "closed":
            return EngineError(f"the engine of {self.model_id} is closed")
        if self.start_error is not None:
            wait = max(0.0, self._retry_at - time.monotonic())
            return EngineUnavailableError(
                f"the engine of {self.model_id} is unavailable: {self.start_error} "
                f"(the next try to start it is in {wait:.1f} s)"
            )
        return None

    def _timed_out(self) -> EngineUnavailableError:
        return EngineUnavailableError(
            f"the engine of {self.model_id} is restarting after a crash "
            f"({self.last_exit}); try again shortly"
        )

    def _running(self) -> EngineProcess | None:
        """The current process unless it is dying (its death not yet handled)."""
        current = self.current
        return current if current is not None and not current.gone else None

    async def ready(self) -> EngineProcess:
        """The running process; waits for a restart (event loop only)."""
        current = self._running()
        if current is not None:
            return current
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.restart_wait
        while (current := self._running()) is None:
            refusal = self._refusal()
            if refusal is not None:
                raise refusal
            remaining = deadline - loop.time()
            if remaining <= 0 or self._wake is None:
                raise self._timed_out()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake.wait(), remaining)
        return current

    def ready_sync(self) -> EngineProcess:
        """The running process; waits for a restart (worker threads; the loop never waits)."""
        on_loop = self._loop is not None and _running_loop() is self._loop
        deadline = time.monotonic() + self.restart_wait
        with self._changed:
            while (current := self._running()) is None:
                refusal = self._refusal()
                if refusal is not None:
                    raise refusal
                remaining = deadline - time.monotonic()
                if remaining <= 0 or on_loop:
                    raise self._timed_out()
                self._changed.wait(remaining)
            return current

    def stats(self) -> dict[str, Any]:
        """The running process's counters, its pid and the restarts so far."""
        current = self.current
        return {
            **(current.stats if current is not None else {}),
            "engine_pid": current.pid if current is not None else None,
            "engine_frames": current.frames if current is not None else 0,
            "engine_restarts": self.restarts,
            "engine_stalls": self.stalls,
            "engine_state": self.state,
        }

    async def close(self) -> None:
        """Stop restarting; close the running process (the model's memory is freed)."""
        self.state = "closed"
        if self._restart is not None:
            self._restart.cancel()  # a process it was starting is closed as it unwinds
            await asyncio.gather(self._restart, return_exceptions=True)
        current, self.current = self.current, None
        self._notify()
        if current is not None:
            await current.close()


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None

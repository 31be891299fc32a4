"""The one durable task runner: work that runs with no connection, its events kept.

Both protocols that run work in the background (LMSP's tasks, the Responses
API's ``background: true``) create a task in the store (``store/tasks.py``) and
hand this runner its ``TaskWork``: batches of ``(name, data)`` events, and how
to end it on an error. The runner knows no protocol: it appends the events to
the store as they come (batched when tokens come fast), writes the final one
(``response.completed``, ``.incomplete``, ``.failed`` or ``.cancelled``) with
the task's final status and result in one durable transaction, lets followers
replay what the store holds and wait for live events, cancels a task (its
protocol names the final event; the generation stops at its next token), and
at shutdown ends every running task failed, as after a restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from jupyter_superfluid.errors import APIError
from jupyter_superfluid.store import Store, TaskEvent

log = logging.getLogger(__name__)

FLUSH_EVERY_S = 0.05  # how long fast token events may wait to be appended in one batch
FOLLOW_POLL_S = 1.0  # followers re-read the store at least this often
FINAL_EVENTS = frozenset(
    {"response.completed", "response.incomplete", "response.failed", "response.cancelled"}
)
Named = tuple[str, Any]  # (event name, data)


def final_status(name: str) -> str:
    """The task status a final event's name implies (``response.completed`` → completed)."""
    return name.removeprefix("response.")


@dataclass
class TaskWork:
    """One task's work, in its protocol's words."""

    batches: AsyncIterator[list[Named]]  # its events; the final one ends it
    outcome: Callable[[Named], tuple[Any, Any]]  # final event → (error, result) to keep
    # The events that end it on an error (None: the server is stopping), the final one last.
    failed: Callable[[APIError | None], list[Named]]


class TaskRunner:
    """Runs, cancels and follows the tasks of one server process, whatever their protocol."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._running: dict[str, tuple[asyncio.Task[None], TaskWork]] = {}
        self._wakeups: dict[str, asyncio.Event] = {}

    def start(self, task_id: str, work: TaskWork) -> None:
        """Run a created (queued) task on the server's loop."""
        runner = asyncio.get_running_loop().create_task(self._run(task_id, work))
        self._running[task_id] = (runner, work)

    def is_running(self, task_id: str) -> bool:
        """Whether this process runs ``task_id`` now."""
        return task_id in self._running

    async def _run(self, task_id: str, work: TaskWork) -> None:
        try:
            await asyncio.to_thread(self.store.start_task, task_id)
            await self._pump(task_id, work)
        except Exception as err:  # a task must end final, never stay running
            if not isinstance(err, APIError):
                log.exception("superfluid: task %s failed", task_id)
                err = APIError(f"internal error: {err}", status=500, code="internal_error")
            await self._end(task_id, work.failed(err), work)
        finally:
            self._running.pop(task_id, None)
            self._wake(task_id)

    async def _pump(self, task_id: str, work: TaskWork) -> None:
        pending: list[Named] = []
        flushed_at = 0.0
        try:
            async for batch in work.batches:
                for name, data in batch:
                    if name in FINAL_EVENTS:
                        await self._end(task_id, [*pending, (name, data)], work)
                        return
                    pending.append((name, data))
                if time.monotonic() - flushed_at >= FLUSH_EVERY_S:
                    if not await self._append(task_id, pending):
                        return  # cancelled meanwhile: the final event is written
                    pending, flushed_at = [], time.monotonic()
        finally:
            await work.batches.aclose()  # type: ignore[attr-defined]

    async def _append(self, task_id: str, events: list[Named]) -> bool:
        seq = await asyncio.to_thread(
            self.store.append_task_events, task_id, list(events), durable=False
        )
        self._wake(task_id)
        return seq is not None

    async def _end(self, task_id: str, events: list[Named], work: TaskWork) -> None:
        """Append ``events`` and finish with the last one, durably (unless already final)."""
        *before, final = events
        if before and not await self._append(task_id, before):
            return
        error, result = work.outcome(final)
        await asyncio.to_thread(
            self.store.finish_task,
            task_id,
            final_status(final[0]),
            final,
            error=error,
            result=result,
        )

    # -- cancel and follow -----------------------------------------------------

    async def cancel(
        self, task_id: str, final: Named, *, error: Any = None, result: Any = None
    ) -> bool:
        """End a live task with ``final`` and stop its work; False if it was final already."""
        # Final first, then stop the runner: its later appends are refused.
        done = await asyncio.to_thread(
            self.store.finish_task,
            task_id,
            final_status(final[0]),
            final,
            error=error,
            result=result,
        )
        running = self._running.get(task_id)
        if done and running is not None:
            running[0].cancel()
        self._wake(task_id)
        return done

    async def follow(self, task_id: str, after: int) -> AsyncIterator[TaskEvent]:
        """Events after ``after``: what is stored, then live ones, until the final one.

        The store raises ``EventHistoryExpired`` when some asked for are past retention.
        """
        while True:
            wakeup = self._wakeups.setdefault(task_id, asyncio.Event())
            events = await asyncio.to_thread(self.store.events_after, task_id, after)
            for event in events:
                yield event
                after = event.seq
                if event.event in FINAL_EVENTS:
                    return
            record = await asyncio.to_thread(self.store.get_task, task_id)
            if record is None or (record.final and record.last_seq <= after):
                return
            # A timeout just re-reads: a wakeup is only a hint that events came.
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(wakeup.wait(), FOLLOW_POLL_S)

    def _wake(self, task_id: str) -> None:
        wakeup = self._wakeups.pop(task_id, None)
        if wakeup is not None:
            wakeup.set()

    async def close(self) -> None:
        """Stop every running task; each ends failed, as after a restart."""
        running = dict(self._running)
        for task_id, (_, work) in running.items():
            record = await asyncio.to_thread(self.store.get_task, task_id)
            if record is not None and not record.final:
                await self._end(task_id, work.failed(None), work)
        for runner, _ in running.values():
            runner.cancel()
        await asyncio.gather(*(r for r, _ in running.values()), return_exceptions=True)

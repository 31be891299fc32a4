"""LMSP tasks (7, 6.4): responses that run with no HTTP connection, with resumable events.

A task is validated and rendered while its POST waits (so a bad request is
still a 400), then created in the store and run as an asyncio task on the
server's loop. Its events are the same numbered LMSP events a stream carries;
they are appended to the store as they come (batched when tokens come fast)
and the final one is written, with the task's final status and final response
object, in one durable transaction. Followers replay what the store holds
after the id they last saw, then wait for live events until the final one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

from jupyter_superfluid.errors import APIError
from jupyter_superfluid.lmsp.events import FINAL_EVENTS
from jupyter_superfluid.lmsp.problems import EventHistoryExpiredError, TaskNotFoundError, problem
from jupyter_superfluid.lmsp.responses import LmspResponses, LmspTurn
from jupyter_superfluid.store import (
    RESTART_PROBLEM,
    EventHistoryExpired,
    IdempotentResult,
    Store,
    TaskEvent,
    TaskRecord,
    new_id,
)
from jupyter_superfluid.web.auth import Principal

log = logging.getLogger(__name__)

FLUSH_EVERY_S = 0.05  # how long fast token events may wait to be appended in one batch
FOLLOW_POLL_S = 1.0  # followers re-read the store at least this often


class TaskRunner:
    """Creates, runs, cancels and follows the tasks of one server process."""

    def __init__(self, responses: LmspResponses, store: Store) -> None:
        self.responses = responses
        self.store = store
        self._running: dict[str, asyncio.Task[None]] = {}
        self._wakeups: dict[str, asyncio.Event] = {}

    async def create(self, lt: LmspTurn, body: dict[str, Any], claim: Any = None) -> TaskRecord:
        """Record a queued task for a prepared request and start running it."""
        task_id = new_id("task")
        result: IdempotentResult | None = None
        if claim is not None:
            result = claim.result({"kind": "task", "task_id": task_id})
        record = await asyncio.to_thread(
            self.store.create_task,
            body,
            principal=lt.prepared.owner,
            task_id=task_id,
            response_id=lt.id,
            idempotency=result,
        )
        if claim is not None:
            claim.done = True
        runner = asyncio.get_running_loop().create_task(self._run(task_id, lt))
        self._running[task_id] = runner
        return record

    async def get(self, task_id: str, principal: Principal) -> TaskRecord:
        """A task visible to ``principal``, or 404 ``task_not_found``."""
        record = await asyncio.to_thread(self.store.get_task, task_id, principal.owner)
        if record is None:
            raise TaskNotFoundError(f"no task with id '{task_id}'", param="task_id")
        return record

    # -- running ---------------------------------------------------------------

    async def _run(self, task_id: str, lt: LmspTurn) -> None:
        try:
            await asyncio.to_thread(self.store.start_task, task_id)
            await self._pump(task_id, lt)
        except APIError as err:
            await self._fail(task_id, lt.id, problem(err))
        except Exception as err:  # a task must end final, never stay running
            log.exception("superfluid: task %s failed", task_id)
            detail = APIError(f"internal error: {err}", status=500, code="internal_error")
            await self._fail(task_id, lt.id, problem(detail))
        finally:
            self._running.pop(task_id, None)
            self._wake(task_id)

    async def _pump(self, task_id: str, lt: LmspTurn) -> None:
        pending: list[tuple[str, Any]] = []
        flushed_at = 0.0
        events = self.responses.stream(lt)
        try:
            async for batch in events:
                for _, name, data in batch:
                    if name in FINAL_EVENTS:
                        if pending and not await self._append(task_id, pending):
                            return
                        await self._finish(task_id, lt, name, data)
                        return
                    pending.append((name, data))
                if time.monotonic() - flushed_at >= FLUSH_EVERY_S:
                    if not await self._append(task_id, pending):
                        return  # cancelled meanwhile: the final event is written
                    pending, flushed_at = [], time.monotonic()
        finally:
            await events.aclose()

    async def _append(self, task_id: str, events: list[tuple[str, Any]]) -> bool:
        seq = await asyncio.to_thread(
            self.store.append_task_events, task_id, list(events), durable=False
        )
        self._wake(task_id)
        return seq is not None

    async def _finish(self, task_id: str, lt: LmspTurn, name: str, data: dict[str, Any]) -> None:
        status = name.removeprefix("response.")
        body = lt.body
        await asyncio.to_thread(
            self.store.finish_task,
            task_id,
            status,
            (name, data),
            error=data.get("error"),
            result=body,
        )

    async def _fail(self, task_id: str, response_id: str, error: dict[str, Any]) -> None:
        data = {"response_id": response_id, "status": "failed", "error": error}
        await asyncio.to_thread(
            self.store.finish_task, task_id, "failed", ("response.failed", data), error=error
        )

    # -- cancel and follow -----------------------------------------------------

    async def cancel(self, task_id: str, principal: Principal) -> TaskRecord:
        """Cancel a live task: ``response.cancelled`` is its final event."""
        record = await self.get(task_id, principal)
        if not record.final:
            data = {"response_id": record.response_id, "status": "cancelled"}
            # Final first, then stop the runner: its later appends are refused.
            await asyncio.to_thread(
                self.store.finish_task, task_id, "cancelled", ("response.cancelled", data)
            )
            runner = self._running.get(task_id)
            if runner is not None:
                runner.cancel()
            self._wake(task_id)
        return await self.get(task_id, principal)

    async def check_retained(self, task_id: str, after: int, param: str = "after") -> None:
        """410 when the events after ``after`` (given as ``param``) are past retention."""
        try:
            await asyncio.to_thread(self.store.events_after, task_id, after, limit=1)
        except EventHistoryExpired as err:
            raise EventHistoryExpiredError(
                f"events of {task_id} before {err.oldest_retained_seq} are past the retention "
                f"window; GET the task for its final result",
                param=param,
            ) from err

    async def follow(self, task_id: str, after: int) -> AsyncIterator[TaskEvent]:
        """Events after ``after``: what is stored, then live ones, until the final one."""
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
        runners = dict(self._running)
        for task_id in runners:
            record = await asyncio.to_thread(self.store.get_task, task_id)
            if record is not None and not record.final:
                await self._fail(task_id, record.response_id or "", RESTART_PROBLEM)
        for runner in runners.values():
            runner.cancel()
        await asyncio.gather(*runners.values(), return_exceptions=True)


def task_object(record: TaskRecord, base: str) -> dict[str, Any]:
    """A task as LMSP shows it, with its final response once done."""
    return {
        "id": record.id,
        "object": "task",
        "status": record.status,
        "response_id": record.response_id,
        "created_at": int(record.created_at),
        "updated_at": int(record.updated_at),
        "last_event_id": record.last_seq,
        "response": record.result,
        "error": record.error,
        "links": {"events": f"{base}/{record.id}/events", "cancel": f"{base}/{record.id}/cancel"},
    }

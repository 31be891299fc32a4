"""LMSP tasks (7, 6.4): responses that run with no HTTP connection, with resumable events.

A task is validated and rendered while its POST waits (so a bad request is
still a 400), then created in the store and handed to the one durable task
runner (``generation.tasks``), which runs it on the server's loop. Its events
are the same numbered LMSP events a stream carries; the runner appends them to
the store as they come and writes the final one, with the task's final status
and final response object, in one durable transaction. Followers replay what
the store holds after the id they last saw, then wait for live events until
the final one.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from jupyter_superfluid.errors import APIError
from jupyter_superfluid.generation.tasks import Named, TaskRunner, TaskWork
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

TASK_PREFIX = "task_"  # LMSP's tasks; the runner's other tasks are not LMSP's to show


class LmspTasks:
    """Creates, cancels and follows LMSP tasks on the shared task runner."""

    def __init__(self, responses: LmspResponses, store: Store, runner: TaskRunner) -> None:
        self.responses = responses
        self.store = store
        self.runner = runner

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
        self.runner.start(task_id, self._work(lt))
        return record

    def _work(self, lt: LmspTurn) -> TaskWork:
        def failed(err: APIError | None) -> list[Named]:
            error = RESTART_PROBLEM if err is None else problem(err)
            return [("response.failed", {"response_id": lt.id, "status": "failed", "error": error})]

        return TaskWork(
            batches=_named(self.responses.stream(lt)),
            outcome=lambda final: (final[1].get("error"), lt.body),
            failed=failed,
        )

    async def get(self, task_id: str, principal: Principal) -> TaskRecord:
        """A task visible to ``principal``, or 404 ``task_not_found``."""
        record = None
        if task_id.startswith(TASK_PREFIX):
            record = await asyncio.to_thread(self.store.get_task, task_id, principal.owner)
        if record is None:
            raise TaskNotFoundError(f"no task with id '{task_id}'", param="task_id")
        return record

    async def cancel(self, task_id: str, principal: Principal) -> TaskRecord:
        """Cancel a live task: ``response.cancelled`` is its final event."""
        record = await self.get(task_id, principal)
        if not record.final:
            data = {"response_id": record.response_id, "status": "cancelled"}
            await self.runner.cancel(task_id, ("response.cancelled", data))
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

    def follow(self, task_id: str, after: int) -> AsyncIterator[TaskEvent]:
        """Events after ``after``: what is stored, then live ones, until the final one."""
        return self.runner.follow(task_id, after)

    async def close(self) -> None:
        """Stop every running task (the shared runner's); each ends failed."""
        await self.runner.close()


async def _named(batches: AsyncIterator[list[Any]]) -> AsyncGenerator[list[Named], None]:
    """LMSP's stamped events as the runner's (name, data) pairs."""
    try:
        async for batch in batches:
            yield [(name, data) for _, name, data in batch]
    finally:
        await batches.aclose()  # type: ignore[attr-defined]


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

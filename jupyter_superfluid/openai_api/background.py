"""Background responses (``background: true``) on the one durable task runner.

A background request is validated and rendered while its POST waits (a bad
request is still a 400), then created as a task of the shared runner
(``generation.tasks``) whose id is the response id, and answered at once with
status ``queued``. It runs with no connection; its events are the same
Responses events, with the same ``sequence_number`` s, a live stream carries,
stored as task events (``seq`` = ``sequence_number`` + 1), so
``GET /v1/responses/{id}?stream=true&starting_after=N`` replays them from any
point, live or after a restart, ending with ``[DONE]`` as a live stream does.
``GET /v1/responses/{id}`` polls it (the stored response once it is
committed, else the task's state), and
``POST /v1/responses/{id}/cancel`` ends it ``cancelled`` (final event
``response.cancelled``) and stops the engine at its next token. A task that a
restart interrupted ends ``failed`` (code ``server_restarted``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import replace
from typing import Any

from jupyter_superfluid.errors import APIError, InvalidRequest
from jupyter_superfluid.generation.stored_turns import PreparedTurn, StoredTurns
from jupyter_superfluid.generation.tasks import Named, TaskRunner, TaskWork
from jupyter_superfluid.openai_api.events import DONE, ResponsesEncoder
from jupyter_superfluid.openai_api.stored import response_body
from jupyter_superfluid.store import EventHistoryExpired, Store, TaskEvent, TaskRecord
from jupyter_superfluid.web.answer import Answer
from jupyter_superfluid.web.auth import Principal
from jupyter_superfluid.web.sse import SSE

PREFIX = "resp_"  # a background task's id is its response's
RESTARTED = "the server stopped before this background response finished; create it again"
LIVE_STATUS = {"queued": "queued", "running": "in_progress"}


class Background:
    """Start, poll, follow and cancel background responses."""

    def __init__(self, turns: StoredTurns, store: Store, runner: TaskRunner) -> None:
        self.turns = turns
        self.store = store
        self.runner = runner

    async def start(self, pt: PreparedTurn, *, stream: bool = False) -> Answer:
        """Create the task and run it; the queued response, or its events when it streams."""
        pt.echo["background"] = True  # every body of it says so, the stored one too
        queued = {**response_body(pt.pending()), "status": "queued"}
        await asyncio.to_thread(
            self.store.create_task,
            {"protocol": "openai", "response": queued},
            principal=pt.owner,
            task_id=pt.id,
            response_id=pt.id,
        )
        self.runner.start(pt.id, self._work(pt))
        if stream:
            return self._follow(pt.id, 0)
        return Answer(body=queued)

    def _work(self, pt: PreparedTurn) -> TaskWork:
        encoder = ResponsesEncoder(pt.id)

        async def batches() -> AsyncGenerator[list[Named], None]:
            run = self.turns.run(pt, encoder)
            try:
                async for batch in run:
                    yield [(e["type"], e) for e in batch]
            finally:
                await run.aclose()  # the engine stops at its next token

        def failed(err: APIError | None) -> list[Named]:
            if err is None:
                err = APIError(RESTARTED, status=503, code="server_restarted")
            events = encoder.error(err.code, err.message, err.param, err.type)
            error = {"code": err.code, "message": err.message}
            body = response_body(replace(pt.pending(), status="failed", error=error))
            final = {"type": "response.failed", "response": body, "sequence_number": encoder.next}
            return [*((e["type"], e) for e in events), ("response.failed", final)]

        def outcome(final: Named) -> tuple[Any, Any]:
            body = final[1].get("response") or {}
            return body.get("error"), body

        return TaskWork(batches=batches(), outcome=outcome, failed=failed)

    # -- poll, cancel, follow -------------------------------------------------

    async def task(self, response_id: str, principal: Principal) -> TaskRecord | None:
        """The background task of ``response_id`` that ``principal`` sees, if any."""
        if not response_id.startswith(PREFIX):
            return None
        return await asyncio.to_thread(self.store.get_task, response_id, principal.owner)

    async def body(self, response_id: str, principal: Principal) -> dict[str, Any] | None:
        """A background response not (or not yet) stored: its state; None if there is none."""
        record = await self.task(response_id, principal)
        if record is None or record.status in ("completed", "incomplete"):
            return None  # finished normally: stored, unless deleted since
        return task_body(record)

    async def cancel(self, response_id: str, principal: Principal) -> bool:
        """Cancel a live background response; False if ``response_id`` is not one."""
        record = await self.task(response_id, principal)
        if record is None:
            return False
        if not record.final:
            body = {**task_body(record), "status": "cancelled"}
            final = {"type": "response.cancelled", "response": body}
            await self.runner.cancel(response_id, ("response.cancelled", final), result=body)
        return True

    async def events(
        self, response_id: str, principal: Principal, starting_after: str | None
    ) -> Answer:
        """Its events after ``starting_after`` (a sequence number; all without), then live."""
        record = await self.task(response_id, principal)
        if record is None:
            await self.turns.record(response_id, principal.owner)  # 404 when unknown
            raise InvalidRequest("only background responses can be streamed again", param="stream")
        after = 0 if starting_after is None else _sequence_number(starting_after) + 1
        try:
            await asyncio.to_thread(self.store.events_after, response_id, after, limit=1)
        except EventHistoryExpired as err:
            raise APIError(
                f"events before {err.oldest_retained_seq - 1} are past the retention window",
                param="starting_after",
                status=410,
                code="event_history_expired",
            ) from err
        return self._follow(response_id, after)

    def _follow(self, response_id: str, after: int) -> Answer:
        return Answer(batches=self._sse(self.runner.follow(response_id, after)), headers_first=True)

    async def _sse(self, events: AsyncIterator[TaskEvent]) -> AsyncGenerator[list[SSE], None]:
        async for event in events:
            data = event.data
            if event.event == "response.failed" and "response" not in data:
                data = await self._recovered(event.task_id)  # failed by a restart
            data = {**data, "sequence_number": event.seq - 1}
            yield [SSE.json(data, event=event.event)]
        yield [DONE]  # as a live stream ends

    async def _recovered(self, task_id: str) -> dict[str, Any]:
        record = await asyncio.to_thread(self.store.get_task, task_id)
        assert record is not None
        return {"type": "response.failed", "response": task_body(record)}


def task_body(record: TaskRecord) -> dict[str, Any]:
    """A background response as its task knows it: the final body, else its live state."""
    if isinstance(record.result, dict):
        return record.result
    body = dict((record.request or {}).get("response") or {})
    body["status"] = LIVE_STATUS.get(record.status, record.status)
    if record.status == "failed":
        error = record.error if isinstance(record.error, dict) else {}
        message = error.get("message") or error.get("detail") or RESTARTED
        body["error"] = {"code": error.get("code") or "server_error", "message": message}
    return body


def _sequence_number(text: str) -> int:
    value = text.strip()
    if not value.isdigit() or len(value) > 18:
        raise InvalidRequest(
            "starting_after must be a sequence number, an integer from 0", param="starting_after"
        )
    return int(value)

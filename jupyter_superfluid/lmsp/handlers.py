"""Thin Tornado handlers of ``/lmsp/v1``; the URL table is at the bottom.

``LmspHandler`` adds LMSP's ground rules to the shared base handler: version
negotiation (``LMSP-Version`` on every answer), problem documents for every
error (ours, auth's and tornado's own). Its streams are ``lmsp.streams``' answers.
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any

from jupyter_superfluid.errors import APIError, InvalidRequest, NotFound
from jupyter_superfluid.lmsp.discovery import Discovery
from jupyter_superfluid.lmsp.idempotency import (
    KEY_HEADER,
    REPLAYED_HEADER,
    Claim,
    Idempotency,
    Replay,
)
from jupyter_superfluid.lmsp.problems import CONTENT_TYPE, problem
from jupyter_superfluid.lmsp.protocol import VERSION, LmspCreateRequest, check_version
from jupyter_superfluid.lmsp.responses import LmspResponses
from jupyter_superfluid.lmsp.service import Lmsp
from jupyter_superfluid.lmsp.streams import followed, replayed
from jupyter_superfluid.lmsp.tasks import LmspTasks, task_object
from jupyter_superfluid.web.base import Access, ProtocolHandler, Route

log = logging.getLogger(__name__)

PREFIX = "/lmsp/v1"
EVENT_ID = re.compile(r"[0-9]{1,19}")
MAX_EVENT_ID = 2**63 - 1  # what the store's integers hold


class LmspHandler(ProtocolHandler):
    """Base of the LMSP handlers."""

    error_style = "lmsp"

    def set_default_headers(self) -> None:
        """Every answer, errors included, says which LMSP version it speaks."""
        super().set_default_headers()
        self.set_header("LMSP-Version", VERSION)

    def check_request(self) -> None:
        """After authentication: negotiate the version, then check the size."""
        check_version(self.request.headers.get("LMSP-Version"))
        super().check_request()

    def render_error(self, err: APIError) -> None:
        """Write ``err`` as an RFC 9457 problem document."""
        doc = problem(err)
        self.set_status(doc["status"])
        if doc["status"] == 401:
            self.set_header("WWW-Authenticate", 'Bearer realm="lmsp"')
        self.set_header("Content-Type", CONTENT_TYPE)
        self.finish(json.dumps(doc))

    def base(self) -> str:
        """This service's ``…/lmsp/v1`` path, under the server's base URL."""
        path = self.request.path
        return path[: path.index(PREFIX) + len(PREFIX)]


class DiscoveryHandler(LmspHandler):
    """Base of the handlers that describe the service and its models."""

    def initialize(self, access: Access, discovery: Discovery) -> None:
        """Receive the discovery service."""
        self.access, self.discovery = access, discovery


class CreatingHandler(LmspHandler):
    """Base of the POSTs that create (responses, tasks): Idempotency-Key claims and replays."""

    def initialize(
        self,
        access: Access,
        responses: LmspResponses,
        tasks: LmspTasks,
        idempotency: Idempotency,
    ) -> None:
        """Receive the responses, tasks and idempotency services."""
        self.access, self.responses = access, responses
        self.tasks, self.idempotency = tasks, idempotency

    async def replay(self, result: dict[str, Any]) -> None:
        """Answer an idempotent retry with the recorded result."""
        self.set_header(REPLAYED_HEADER, "true")
        kind = result.get("kind")
        if kind == "stream":
            await self.answer(replayed(result["events"]))
        elif kind == "task":
            record = await self.tasks.get(result["task_id"], self.principal)
            self.write_json(task_object(record, self.base() + "/tasks"), status=202)
        else:
            self.write_json(result["body"])

    async def claim(self, route: str, body: dict[str, Any]) -> Claim | Replay | None:
        """The Idempotency-Key claim of a creating POST (None without a key)."""
        key = self.request.headers.get(KEY_HEADER)
        return await self.idempotency.begin(self.principal, key, route, body)


class TaskHandlerBase(LmspHandler):
    """Base of the handlers of one task."""

    def initialize(self, access: Access, tasks: LmspTasks) -> None:
        """Receive the task runner."""
        self.access, self.tasks = access, tasks


class ServiceHandler(DiscoveryHandler):
    """``GET /lmsp/v1``: the service document."""

    async def get(self) -> None:
        """Versions, service, capabilities and links."""
        self.write_json(self.discovery.service(self.base()))


class ModelsHandler(DiscoveryHandler):
    """``GET /lmsp/v1/models``."""

    scope = {"GET": "models:read"}

    async def get(self) -> None:
        """Every model with its capabilities."""
        self.write_json(await self.discovery.listing())


class ModelHandler(DiscoveryHandler):
    """``GET /lmsp/v1/models/{id}``."""

    scope = {"GET": "models:read"}

    async def get(self, model_id: str) -> None:
        """One model with its capabilities."""
        self.write_json(await self.discovery.model(model_id))


class ResponsesHandler(CreatingHandler):
    """``POST /lmsp/v1/responses``."""

    scope = {"POST": "responses:write"}
    request_models = {"post": LmspCreateRequest}

    async def post(self) -> None:
        """Create a response, streamed or not (idempotent with a key)."""
        body = self.json_body()
        outcome = await self.claim("responses", body)
        if isinstance(outcome, Replay):
            await self.replay(outcome.result)
            return
        try:
            lt = await self.responses.prepare(body, self.principal)
            await self.answer(await self.responses.answer(lt, outcome))
        finally:
            if outcome is not None:
                await outcome.release()  # a no-op once its result is recorded


class ResponseHandler(LmspHandler):
    """``GET /lmsp/v1/responses/{id}``."""

    scope = {"GET": "responses:read"}

    def initialize(self, access: Access, responses: LmspResponses) -> None:
        """Receive the responses service."""
        self.access, self.responses = access, responses

    async def get(self, response_id: str) -> None:
        """A stored response."""
        self.write_json(await self.responses.retrieve(response_id, self.principal))


class TasksHandler(CreatingHandler):
    """``POST /lmsp/v1/tasks``."""

    scope = {"POST": "tasks:write"}
    request_models = {"post": LmspCreateRequest}

    async def post(self) -> None:
        """Create a task that runs with no connection: 202 and the task."""
        body = self.json_body()
        outcome = await self.claim("tasks", body)
        if isinstance(outcome, Replay):
            await self.replay(outcome.result)
            return
        try:
            lt = await self.responses.prepare(body, self.principal, task=True)
            record = await self.tasks.create(lt, body, outcome)
        finally:
            if outcome is not None:
                await outcome.release()
        self.set_header("Location", f"{self.base()}/tasks/{record.id}")
        self.write_json(task_object(record, self.base() + "/tasks"), status=202)


class TaskHandler(TaskHandlerBase):
    """``GET /lmsp/v1/tasks/{id}``."""

    scope = {"GET": "tasks:read"}

    async def get(self, task_id: str) -> None:
        """The task, with its final response once done."""
        record = await self.tasks.get(task_id, self.principal)
        self.write_json(task_object(record, self.base() + "/tasks"))


class TaskEventsHandler(TaskHandlerBase):
    """``GET /lmsp/v1/tasks/{id}/events``."""

    scope = {"GET": "tasks:read"}

    async def get(self, task_id: str) -> None:
        """Replay the events after ``?after=`` (else ``Last-Event-ID``), then follow live."""
        runner = self.tasks
        await runner.get(task_id, self.principal)
        after, param = self.resume_point()
        await runner.check_retained(task_id, after, param)
        await self.answer(followed(runner.follow(task_id, after)))

    def resume_point(self) -> tuple[int, str]:
        """The last id the client saw, and where it said so; ``after`` wins."""
        after = self.get_query_argument("after", None)
        if after is not None:
            return _event_id(after, "after"), "after"
        header = self.request.headers.get("Last-Event-ID")
        if header is None:
            return 0, "after"
        return _event_id(header, "Last-Event-ID"), "Last-Event-ID"


class TaskCancelHandler(TaskHandlerBase):
    """``POST /lmsp/v1/tasks/{id}/cancel``."""

    scope = {"POST": "tasks:write"}

    async def post(self, task_id: str) -> None:
        """Cancel the task; its final event is ``response.cancelled``."""
        record = await self.tasks.cancel(task_id, self.principal)
        self.write_json(task_object(record, self.base() + "/tasks"))


class UnknownHandler(LmspHandler):
    """Anything else under ``/lmsp/v1``: a 404 problem, whatever the method."""

    def initialize(self, access: Access) -> None:
        """Receive nothing but access."""
        self.access = access

    def _unknown(self, *args: Any) -> None:
        raise NotFound(f"no LMSP endpoint at {self.request.path}", code="not_found")

    get = post = put = patch = delete = _unknown  # type: ignore[assignment]


def _event_id(text: str, param: str) -> int:
    value = text.strip()
    if not EVENT_ID.fullmatch(value) or int(value) > MAX_EVENT_ID:
        raise InvalidRequest(
            f"{param} must be an event id, an integer from 0 to {MAX_EVENT_ID}", param=param
        )
    return int(value)


def routes(*, lmsp: Lmsp) -> list[Route]:
    """The LMSP URL table (relative to the server's base URL); each handler gets what it uses."""
    task = rf"{PREFIX}/tasks/(?P<task_id>[^/]+)"
    discovery = {"discovery": lmsp.discovery}
    creating = {"responses": lmsp.responses, "tasks": lmsp.tasks, "idempotency": lmsp.idempotency}
    stored = {"responses": lmsp.responses}
    tasks = {"tasks": lmsp.tasks}
    return [
        (rf"{PREFIX}/?", ServiceHandler, discovery),
        (rf"{PREFIX}/models", ModelsHandler, discovery),
        (rf"{PREFIX}/models/(?P<model_id>.+)", ModelHandler, discovery),
        (rf"{PREFIX}/responses", ResponsesHandler, creating),
        (rf"{PREFIX}/responses/(?P<response_id>[^/]+)", ResponseHandler, stored),
        (rf"{PREFIX}/tasks", TasksHandler, creating),
        (task, TaskHandler, tasks),
        (rf"{task}/events", TaskEventsHandler, tasks),
        (rf"{task}/cancel", TaskCancelHandler, tasks),
        (rf"{PREFIX}/.*", UnknownHandler, {}),
    ]

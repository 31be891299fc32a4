"""Thin Tornado handlers of ``/superfluid/v1/models…``; ``routes`` last.

Errors are in OpenAI's shape, as on ``/v1``. Model ids may hold slashes
(``superfluid/tiny-qwen3``), so the action routes (``…/load``, ``…/unload``) and
``…/events`` come before the plain model route.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel

from jupyter_superfluid.errors import Conflict, InvalidRequest, NotFound
from jupyter_superfluid.models.hub import ModelHub
from jupyter_superfluid.models.lifecycle import ModelConflict, ModelLifecycle
from jupyter_superfluid.models.registry import ModelNotFoundError
from jupyter_superfluid.models_api.events import follow, model_object, snapshot
from jupyter_superfluid.models_api.protocol import (
    MAX_EVENT_ID,
    AddModelRequest,
    EventsQuery,
    RemoveQuery,
)
from jupyter_superfluid.validation import parse
from jupyter_superfluid.web.base import Access, ProtocolHandler, Route

PREFIX = "/superfluid/v1/models"
READ = {"GET": "models:read"}
WRITE = {"POST": "models:write", "DELETE": "models:write"}


class ModelsApiHandler(ProtocolHandler):
    """Base of the models API handlers: OpenAI's error shape, the served models."""

    error_style = "openai"

    def initialize(self, access: Access, models: ModelHub) -> None:
        """Receive the served models."""
        self.access, self.models = access, models

    @property
    def lifecycle(self) -> ModelLifecycle:
        """The model lifecycle, where states change."""
        return self.models.lifecycle

    def known(self, model_id: str) -> str:
        """The id of a served model, or 404 ``model_not_found``."""
        try:
            return self.lifecycle.resolve_id(model_id)
        except ModelNotFoundError as err:
            raise NotFound(str(err), param="model_id", code="model_not_found") from err

    def query(self, cls: type[BaseModel]) -> Any:
        """The query string as ``cls`` (last value of each name), or 400 naming the field."""
        values = {k: self.get_query_argument(k) for k in self.request.query_arguments}
        return parse(cls, values)


class ModelsHandler(ModelsApiHandler):
    """``GET|POST /superfluid/v1/models``."""

    scope = {**READ, **WRITE}
    request_models: ClassVar[dict[str, type[BaseModel]]] = {"post": AddModelRequest}

    async def get(self) -> None:
        """Every served model's state, with the id of the last event they include."""
        listing = snapshot(self.lifecycle)
        self.write_json({"object": "list", **{k: listing[k] for k in ("data", "last_event_id")}})

    async def post(self) -> None:
        """Serve one more model (201; 200 if it is served already): its download starts."""
        req = parse(AddModelRequest, self.json_body())
        try:
            state, created = await self.lifecycle.add(req.spec, load=req.load)
        except ModelConflict as err:
            raise Conflict(str(err), param="spec", code="model_exists") from err
        except ValueError as err:
            raise InvalidRequest(str(err), param="spec") from err
        self.write_json(model_object(state), status=201 if created else 200)


class ModelEventsHandler(ModelsApiHandler):
    """``GET /superfluid/v1/models/events``."""

    scope = READ

    async def get(self) -> None:
        """A snapshot, then every change (SSE); resumes after ``?after=`` or ``Last-Event-ID``."""
        query = self.query(EventsQuery)
        after = query.after
        header = self.request.headers.get("Last-Event-ID")
        if after is None and header is not None:
            after = _event_id(header)
        batches = follow(self.lifecycle, after, query.model)
        await self.pump(batches, headers_first=True)


class ModelHandler(ModelsApiHandler):
    """``GET|DELETE /superfluid/v1/models/{id}``."""

    scope = {**READ, **WRITE}

    async def get(self, model_id: str) -> None:
        """One model's state."""
        state = self.lifecycle.state(self.known(model_id))
        self.write_json(model_object(state, self.lifecycle))

    async def delete(self, model_id: str) -> None:
        """Stop serving a model (unloading it); ``?delete_files=true`` deletes its download."""
        query: RemoveQuery = self.query(RemoveQuery)
        model_id = self.known(model_id)
        try:
            last = await self.lifecycle.remove(model_id, delete_files=query.delete_files)
        except ValueError as err:
            raise InvalidRequest(str(err), param="delete_files") from err
        self.write_json(
            {
                "id": last.id,
                "object": "superfluid.model.deleted",
                "deleted": True,
                "files_deleted": query.delete_files,
            }
        )


class ModelLoadHandler(ModelsApiHandler):
    """``POST /superfluid/v1/models/{id}/load``."""

    scope = WRITE

    async def post(self, model_id: str) -> None:
        """Start loading a model, downloading it first if needed (202: follow its events)."""
        state = await self.lifecycle.load(self.known(model_id))
        self.write_json(model_object(state), status=200 if state.state == "loaded" else 202)


class ModelUnloadHandler(ModelsApiHandler):
    """``POST /superfluid/v1/models/{id}/unload``."""

    scope = WRITE

    async def post(self, model_id: str) -> None:
        """Free a model's memory (its engine closes); a download that runs stops, resumable."""
        state = await self.lifecycle.unload(self.known(model_id))
        self.write_json(model_object(state))


def _event_id(text: str) -> int:
    """A ``Last-Event-ID`` header's event id, or 400 naming the header."""
    value = text.strip()
    if not value.isascii() or not value.isdigit() or int(value) > MAX_EVENT_ID:
        raise InvalidRequest(
            f"Last-Event-ID must be an event id, an integer from 0 to {MAX_EVENT_ID}",
            param="Last-Event-ID",
        )
    return int(value)


def routes(*, models: ModelHub) -> list[Route]:
    """The models API URL table (relative to the server's base URL)."""
    deps = {"models": models}
    model = r"(?P<model_id>.+)"
    return [
        (rf"{PREFIX}", ModelsHandler, deps),
        (rf"{PREFIX}/events", ModelEventsHandler, deps),
        (rf"{PREFIX}/{model}/load", ModelLoadHandler, deps),
        (rf"{PREFIX}/{model}/unload", ModelUnloadHandler, deps),
        (rf"{PREFIX}/{model}", ModelHandler, deps),
    ]

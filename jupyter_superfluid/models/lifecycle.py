"""The model lifecycle: one state machine per served model, the one source of its state.

Each model goes "resolve its files (download) → launch its engine → loaded / failed →
close" (``states`` draws the states). ``ModelLifecycle`` runs at most one job
per model at a time, in the background: a download runs in a worker thread of this
(the server's) process, never in the engine's, reporting progress through the event
log; a load goes through the registry's loader and then probes the template once.
Every change is an event in ``events``, from which ``/v1/models``, LMSP discovery and
``/superfluid/v1/models/events`` all read.

Requests ask ``ready``: a loaded model at once; else the model's job is started (or
joined) and awaited for at most ``model_wait`` seconds, then ``ModelNotReady`` says
where the model is, so that no request waits silently on a download. A request for
a model that failed tries again; so do ``load`` and adding the model again.

Models added or removed at run time are remembered in the store
(``served_set.served_specs`` rebuilds the served set at start), and an added model
whose download a restart interrupted resumes it (``resume``).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from typing import Any, Literal

from jupyter_superfluid.engine.base import EngineError, EngineUnavailableError
from jupyter_superfluid.models import served_set
from jupyter_superfluid.models.downloads import (
    DownloadCancelled,
    DownloadError,
    DownloadProgress,
    HubDownload,
)
from jupyter_superfluid.models.hub_cache import partial_bytes
from jupyter_superfluid.models.loaded import LoadedModel, with_codec
from jupyter_superfluid.models.registry import (
    ModelRegistry,
    ModelSpec,
    ModelUnavailableError,
    parse_spec,
    unavailable,
)
from jupyter_superfluid.models.served_set import initial_state, missing_files, same_model
from jupyter_superfluid.models.states import (
    EventLog,
    EventType,
    ModelState,
    Origin,
    Progress,
    State,
)
from jupyter_superfluid.store import Store

log = logging.getLogger(__name__)

Want = Literal["available", "loaded"]


class ModelNotReady(Exception):
    """The model is downloading or loading; ``state`` says where it is."""

    def __init__(self, state: ModelState) -> None:
        super().__init__(state.describe())
        self.state = state


class ModelFailed(Exception):
    """The model's last attempt failed; ``state.error`` says why."""

    def __init__(self, state: ModelState) -> None:
        super().__init__(state.error or "failed")
        self.state = state


class ModelConflict(ValueError):
    """An id served already, with another spec."""


class ModelLifecycle:
    """Served models, their states and jobs; the only place they change."""

    def __init__(
        self,
        registry: ModelRegistry,
        origins: dict[str, Origin] | None = None,
        *,
        store: Store | None = None,
        model_wait: float = 5.0,
        download_retries: int = 5,
        download_backoff_s: float = 1.0,
    ) -> None:
        self.registry = registry
        self.store = store
        self.model_wait = model_wait
        self.events = EventLog(start=int(time.time() * 1000))
        self.download_retries = download_retries
        self.download_backoff_s = download_backoff_s
        self._states: dict[str, ModelState] = {}
        self._loaded: dict[str, LoadedModel] = {}
        self._jobs: dict[str, asyncio.Task[None]] = {}
        self._want: dict[str, Want] = {}
        self._downloads: dict[str, HubDownload] = {}
        for model_id in registry.ids():
            origin = (origins or {}).get(model_id, "config")
            self._states[model_id] = initial_state(registry.spec(model_id), origin)

    # -- reading -------------------------------------------------------------------

    def ids(self) -> list[str]:
        """Every served model id, in order."""
        return list(self._states)

    def resolve_id(self, model: str) -> str:
        """The id of ``model`` (an id, or its spec text); ModelNotFoundError if unknown."""
        return self.registry.spec(model).id

    def state(self, model: str) -> ModelState:
        """The state of one model."""
        return self._states[self.resolve_id(model)]

    def states(self) -> list[ModelState]:
        """Every model's state, in order."""
        return list(self._states.values())

    def loaded(self, model_id: str) -> LoadedModel | None:
        """The loaded model, if it is loaded."""
        return self._loaded.get(model_id)

    # -- requests ------------------------------------------------------------------

    async def ready(self, model: str) -> LoadedModel:
        """The loaded model, waiting up to ``model_wait`` s; else ModelNotReady / ModelFailed."""
        model_id = self.resolve_id(model)
        if model_id in self._loaded:
            return self._loaded[model_id]
        job = self.start(model_id, "loaded")
        if job is not None and self.model_wait > 0:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(job), self.model_wait)
        if model_id in self._loaded:
            return self._loaded[model_id]
        state = self._states[model_id]
        if state.state == "failed":
            raise ModelFailed(state)
        raise ModelNotReady(state)

    def start(self, model_id: str, want: Want) -> asyncio.Task[None] | None:
        """Start (or join) the model's job towards ``want``; None when it is there already."""
        if want == "loaded":
            self._want[model_id] = "loaded"
        if model_id in self._loaded:
            return None
        job = self._jobs.get(model_id)
        if job is None or job.done():
            if want == "available" and self._states[model_id].state in ("available", "unloaded"):
                return None
            self._want.setdefault(model_id, want)
            job = asyncio.get_running_loop().create_task(self._run(model_id))
            self._jobs[model_id] = job
            self._set_starting(model_id)
        return job

    def _set_starting(self, model_id: str) -> None:
        """The state a new job starts in, so that it shows before the job's first step."""
        state = self._states[model_id]
        fetching = state.state == "not_downloaded" or state.error_code == "model_unavailable"
        if fetching:
            self._set(model_id, "downloading", progress=state.progress)
        elif self._want.get(model_id) == "loaded":
            self._set(model_id, "loading")

    # -- management ----------------------------------------------------------------

    async def add(self, text: str, *, load: bool = False) -> tuple[ModelState, bool]:
        """Serve one more model (fetching its files); (its state, whether it is new).

        The same spec again is no error: it fetches the files again if they are
        missing (resuming a stopped download). ValueError for a bad spec;
        ModelConflict for an id served with another spec.
        """
        spec = parse_spec(text)
        created = spec.id not in self._states
        if created:
            self.registry.add(text)
            state = await asyncio.to_thread(initial_state, spec, "added")
            self._states[spec.id] = state
            if self.store is not None:
                await asyncio.to_thread(self.store.remember_added_model, spec.id, spec.spec)
            self.events.append("model.added", state)
        elif not same_model(self.registry.spec(spec.id), spec):
            served = self.registry.spec(spec.id).spec
            raise ModelConflict(
                f"model id {spec.id!r} is served already as {served!r}: remove it first, "
                f"or choose another id (ID={text})"
            )
        if load or self._states[spec.id].state in ("not_downloaded", "failed"):
            self.start(spec.id, "loaded" if load else "available")
        return self._states[spec.id], created

    async def load(self, model: str) -> ModelState:
        """Start loading a model (downloading it first if needed); its state now."""
        model_id = self.resolve_id(model)
        self.start(model_id, "loaded")
        return self._states[model_id]

    async def unload(self, model: str) -> ModelState:
        """Free a model's memory (waiting for a load that runs); stop a download that runs."""
        model_id = self.resolve_id(model)
        job = self._jobs.get(model_id)
        if job is not None and not job.done():
            self._want[model_id] = "available"  # the running job stops short of loading
        download = self._downloads.get(model_id)
        if download is not None:
            download.cancel()  # its partial file stays: loading later resumes it
        if job is not None and not job.done():
            await asyncio.shield(job)
        if self._loaded.pop(model_id, None) is not None:
            await self.registry.unload(model_id)
            self._set(model_id, "unloaded")
        return self._states[model_id]

    async def remove(self, model: str, *, delete_files: bool = False) -> ModelState:
        """Stop serving a model (and, if asked, delete its cached files); its last state."""
        model_id = self.resolve_id(model)
        spec = self.registry.spec(model_id)
        if delete_files and spec.kind == "path":
            raise ValueError(
                f"model {model_id!r} is a file of yours ({spec.source}), not a cached "
                "download: superfluid never deletes it"
            )
        await self.unload(model_id)
        await self.registry.remove(model_id)
        state = self._states.pop(model_id)
        self._want.pop(model_id, None)
        self._jobs.pop(model_id, None)
        if delete_files:
            await asyncio.to_thread(served_set.delete_files, spec)
        if self.store is not None:
            await asyncio.to_thread(self.store.remember_removed_model, model_id)
        self.events.append("model.removed", state)
        return state

    async def resume(self) -> None:
        """Continue the downloads of added models that a restart interrupted."""
        for state in self.states():
            if state.origin == "added" and state.state == "not_downloaded":
                self.start(state.id, "available")

    async def close(self) -> None:
        """Stop downloads, wait for the jobs, close every engine, end the event followers."""
        for download in list(self._downloads.values()):
            download.cancel()
        jobs = [job for job in self._jobs.values() if not job.done()]
        await asyncio.gather(*jobs, return_exceptions=True)
        self._loaded.clear()
        await self.registry.close()
        self.events.close()

    # -- the jobs ------------------------------------------------------------------

    async def _run(self, model_id: str) -> None:
        """Fetch the model's missing files, then load it if it is wanted loaded."""
        try:
            spec = self.registry.spec(model_id)
            missing = await asyncio.to_thread(missing_files, spec)
            if missing and not await self._download(model_id, spec, missing):
                return
            if self._want.get(model_id) == "loaded":
                await self._load(model_id)
            elif self._states[model_id].state == "downloading":  # nothing was missing after all
                self._set(model_id, "available")
        except Exception as err:  # a bug must not leave a model "loading" forever
            log.exception("superfluid: the job of model %s failed", model_id)
            self._set(model_id, "failed", error=f"{type(err).__name__}: {err}")
        finally:
            self._want.pop(model_id, None)

    async def _download(self, model_id: str, spec: ModelSpec, files: list[Any]) -> bool:
        """Fetch ``files`` in a thread, with progress events; whether they are all here."""
        loop = asyncio.get_running_loop()

        def on_progress(progress: DownloadProgress) -> None:
            # A loop closed under a cancelled download raises RuntimeError: nobody listens.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self._on_progress, model_id, progress)

        download = HubDownload(
            files,
            on_progress=on_progress,
            retries=self.download_retries,
            backoff_s=self.download_backoff_s,
        )
        self._downloads[model_id] = download
        start = Progress(sum(partial_bytes(f) for f in files))
        self._set(model_id, "downloading", progress=start)
        log.info("superfluid: downloading model %s (%s)", model_id, spec.spec)
        try:
            await asyncio.to_thread(download.run)
        except asyncio.CancelledError:  # the thread runs on: stop it too
            download.cancel()
            raise
        except DownloadCancelled:
            self._set(model_id, "not_downloaded", progress=self._states[model_id].progress)
            return False
        except DownloadError as err:
            message = str(unavailable(spec, str(err)))
            log.warning("superfluid: %s", message)
            self._set(model_id, "failed", error=message, code="model_unavailable")
            return False
        finally:
            self._downloads.pop(model_id, None)
        self._set(model_id, "available", progress=self._states[model_id].progress)
        return True

    def _on_progress(self, model_id: str, progress: DownloadProgress) -> None:
        state = self._states.get(model_id)
        if state is None or state.state != "downloading":
            return  # a late report of a download that ended or was removed
        p = Progress(progress.done, progress.total, progress.rate, progress.file)
        self._set(model_id, "downloading", progress=p, event="model.progress")

    async def _load(self, model_id: str) -> None:
        """Launch the engine and probe its template; the state ends loaded or failed."""
        self._set(model_id, "loading")
        try:
            engine = await self.registry.get(model_id)
            loaded = await asyncio.to_thread(with_codec, model_id, engine)
        except ModelUnavailableError as err:
            self._set(model_id, "failed", error=str(err), code="model_unavailable")
            return
        except EngineUnavailableError as err:  # a remote engine that cannot be reached
            self._set(model_id, "failed", error=str(err), code=err.code)
            return
        except EngineError as err:
            self._set(model_id, "failed", error=str(err), code="model_load_failed")
            return
        if self._want.get(model_id) != "loaded":  # unloaded while it loaded
            await self.registry.unload(model_id)
            self._set(model_id, "unloaded")
            return
        self._loaded[model_id] = loaded
        self._set(model_id, "loaded")
        log.info("superfluid: model %s loaded", model_id)

    def _set(
        self,
        model_id: str,
        state: State,
        *,
        progress: Progress | None = None,
        error: str | None = None,
        code: str | None = None,
        event: EventType = "model.state",
    ) -> None:
        """Record a model's new state and log it as an event."""
        old = self._states.get(model_id)
        if old is None:
            return  # removed meanwhile
        changed = old.state != state
        new = dataclasses.replace(
            old,
            state=state,
            progress=progress,
            error=error,
            error_code=code if error else None,
            since=time.time() if changed else old.since,
        )
        self._states[model_id] = new
        self.events.append(event, new)

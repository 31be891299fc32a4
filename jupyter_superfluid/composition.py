"""The composition root: builds every part once and gives each feature only what it uses.

Both hosts (the Jupyter extension in ``app.py``, the standalone server in
``serve.py``) call ``Composition.build(config)`` and serve
``composition.routes()``. Each feature has a ``routes(...)`` function that takes
the parts its handlers use, by keyword, and hands them over as URLSpec kwargs;
no handler sees anything else. To add a feature: build its parts in ``build``,
add its ``routes(...)`` to ``feature_routes``, close its parts in ``close``,
and put its package in the import-linter layers of ``pyproject.toml``.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from pathlib import Path

from jupyter_superfluid.config import Superfluid
from jupyter_superfluid.engine.launch import launcher_for
from jupyter_superfluid.generation.service import ChatService
from jupyter_superfluid.generation.stored_turns import StoredTurns
from jupyter_superfluid.generation.tasks import TaskRunner
from jupyter_superfluid.lmsp import handlers as lmsp_handlers
from jupyter_superfluid.lmsp.service import Lmsp
from jupyter_superfluid.models.hub import ModelHub
from jupyter_superfluid.models.lifecycle import ModelLifecycle
from jupyter_superfluid.models.registry import DEFAULT_MODELS, ModelRegistry
from jupyter_superfluid.models.served_set import served_specs
from jupyter_superfluid.models_api import handlers as models_api_handlers
from jupyter_superfluid.openai_api import (
    completions_handlers,
    conversations_handlers,
    responses_handlers,
)
from jupyter_superfluid.openai_api import handlers as openai_handlers
from jupyter_superfluid.openai_api.background import Background
from jupyter_superfluid.openai_api.chat_completions import ChatCompletions
from jupyter_superfluid.openai_api.compaction import Compaction
from jupyter_superfluid.openai_api.compaction import routes as compaction_routes
from jupyter_superfluid.openai_api.compaction_blob import CompactionSigner
from jupyter_superfluid.openai_api.completions import DEFAULT_MAX_TOKENS, Completions
from jupyter_superfluid.openai_api.conversations import Conversations
from jupyter_superfluid.openai_api.input_tokens import routes as input_tokens_routes
from jupyter_superfluid.openai_api.responses import Responses
from jupyter_superfluid.openai_api.websocket import Sockets
from jupyter_superfluid.openai_api.websocket import routes as websocket_routes
from jupyter_superfluid.store import Store
from jupyter_superfluid.web import openapi
from jupyter_superfluid.web.auth import KeyRing
from jupyter_superfluid.web.base import Access, Route

log = logging.getLogger("jupyter_superfluid")


@dataclass
class Composition:
    """Every long-lived part of one server, built from one ``Superfluid`` config."""

    config: Superfluid
    access: Access
    models: ModelHub
    store: Store
    chat: ChatService
    chat_completions: ChatCompletions
    responses: Responses
    lmsp: Lmsp
    completions: Completions
    conversations: Conversations
    sockets: Sockets

    @property
    def compaction(self) -> Compaction:
        """``/v1/responses/compact``, over the Responses service and its signer."""
        assert self.responses.signer is not None
        return Compaction(self.responses, self.responses.signer)

    @classmethod
    def build(cls, config: Superfluid) -> Composition:
        """Build the parts for ``config`` (models load later, off the event loop)."""
        _route_package_log(config.log)
        access = Access(KeyRing(config.api_keys, config.key_policy), config.max_request_bytes)
        Path(config.sessions_dir).mkdir(parents=True, exist_ok=True)
        store = Store(
            Path(config.sessions_dir),
            idempotency_ttl=config.idempotency_ttl,
            task_event_retention=config.task_event_retention,
        )
        models = ModelHub(_lifecycle(config, store))
        chat = ChatService(models, store, default_max_tokens=config.max_tokens)
        turns = StoredTurns(chat, store)
        conversations = Conversations(store)
        tasks = TaskRunner(store)  # the one runner of LMSP tasks and background responses
        signer = CompactionSigner(Path(config.sessions_dir))
        return cls(
            config,
            access,
            models,
            store,
            chat,
            ChatCompletions(chat),
            Responses(turns, conversations, Background(turns, store, tasks), signer),
            Lmsp.create(turns, store, models, config, tasks),
            Completions(
                models,
                default_max_tokens=config.max_tokens or DEFAULT_MAX_TOKENS,
                salts=chat.salts,
            ),
            conversations,
            Sockets(config.websocket_connections, config.websocket_messages_per_second),
        )

    def feature_routes(self) -> list[Route]:
        """Every feature's URL table, each given only its own dependencies."""
        return [
            *openai_handlers.routes(models=self.models, chat_completions=self.chat_completions),
            *input_tokens_routes(responses=self.responses),  # before /v1/responses/{id}
            *compaction_routes(compaction=self.compaction),  # before /v1/responses/{id}
            *websocket_routes(responses=self.responses, sockets=self.sockets),  # before these
            *responses_handlers.routes(responses=self.responses),
            *completions_handlers.routes(completions=self.completions),
            *conversations_handlers.routes(conversations=self.conversations),
            *lmsp_handlers.routes(lmsp=self.lmsp),
            *models_api_handlers.routes(models=self.models),
        ]

    def routes(self) -> list[Route]:
        """Every served route: the features', and the OpenAPI document describing them."""
        served = self.feature_routes()
        return [*openapi.routes(served=served), *served]

    def describe(self) -> str:
        """One line naming the served models and the store, for the start-up log."""
        return f"models: {', '.join(self.models.ids())}; store: {self.config.sessions_dir}"

    async def start(self) -> None:
        """Once the server runs: resume interrupted downloads, and preload if configured."""
        await self.models.lifecycle.resume()
        if self.config.preload:
            await self.preload()

    async def preload(self) -> None:
        """Load the first model in the background, logging the outcome."""
        model_id = self.models.default_id()
        if model_id is None:
            return
        lifecycle = self.models.lifecycle
        job = lifecycle.start(model_id, "loaded")
        if job is not None:
            await asyncio.shield(job)  # stopping the server cancels this, not the job
        state = lifecycle.state(model_id)
        if state.state == "loaded":
            log.info("superfluid: model %s loaded", model_id)
        else:  # logged, and answered per request later
            log.warning("superfluid: model %s did not load: %s", model_id, state.error)

    async def close(self) -> None:
        """Close the WebSocket connections, stop the tasks and the engines, close the store."""
        self.sockets.close_all()
        await self.lmsp.close()
        await self.models.close()
        await asyncio.to_thread(self.store.close)


def _route_package_log(host_log: logging.Logger | logging.LoggerAdapter[logging.Logger]) -> None:
    """Let the package's own loggers (model loads, engine processes) write to the host's log."""
    package = logging.getLogger("jupyter_superfluid")
    handlers = getattr(host_log, "handlers", None) or []
    if package.handlers or not handlers:
        return
    for handler in handlers:
        package.addHandler(handler)
    package.setLevel(logging.INFO)


def _lifecycle(config: Superfluid, store: Store) -> ModelLifecycle:
    """The served models: the configured ones with the run-time changes kept in ``store``."""
    configured = list(config.models) or list(DEFAULT_MODELS)
    specs, origins = served_specs(configured, store.served_model_changes())
    registry = ModelRegistry(
        specs,
        cache_dir=Path(config.model_cache_dir),
        context_size=config.context_size,
        threads=config.threads or None,
        gpu_layers=config.gpu_layers,
        cache_slots=config.cache_slots,
        kv_tokens=config.kv_tokens or None,
        park_mib=config.cache_ram,
        launcher=launcher_for(
            config.engine_isolation,
            restart_wait=config.engine_restart_wait,
            stall_timeout=config.engine_stall_timeout,
            stream_interval=config.engine_stream_interval,
        ),
        remote_timeout=config.remote_timeout,
        pool_routing=config.pool_routing,
        kv_dir=str(Path(config.sessions_dir) / "kv"),
        disk_mib=config.cache_disk,
        kv_write_delay=config.kv_write_delay,
    )
    return ModelLifecycle(registry, origins, store=store, model_wait=config.model_wait)

"""The composition root: builds the engine registry, store and protocol services once.

Both hosts (the Jupyter extension and the standalone server) call
``Services.create`` and hand the result to every handler as a URLSpec kwarg.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .config import Superfluid
from .engine.registry import ModelRegistry
from .errors import NotFound
from .generation.models import ModelHub
from .generation.service import ChatService
from .lmsp.service import Lmsp
from .openai_api.chat_completions import ChatCompletions
from .openai_api.responses import Responses
from .sessions import Store
from .web.auth import KeyRing
from .web.openapi import OpenAPIHandler, openapi_document

log = logging.getLogger("jupyter_superfluid")


@dataclass
class Services:
    """Everything the handlers need, built from one ``Superfluid`` config."""

    config: Superfluid
    keys: KeyRing
    models: ModelHub
    store: Store
    chat: ChatService
    chat_completions: ChatCompletions
    responses: Responses
    lmsp: Lmsp

    @classmethod
    def create(cls, config: Superfluid) -> Services:
        """Build the services for ``config`` (models load later, off the event loop)."""
        keys = KeyRing(config.api_keys, config.key_policy)
        registry = ModelRegistry(
            list(config.models) or None,
            cache_dir=Path(config.model_cache_dir),
            context_size=config.context_size,
            threads=config.threads or None,
            gpu_layers=config.gpu_layers,
            cache_slots=config.cache_slots,
            kv_tokens=config.kv_tokens or None,
            park_mib=config.cache_ram,
        )
        models = ModelHub(registry)
        Path(config.sessions_dir).mkdir(parents=True, exist_ok=True)
        store = Store(
            Path(config.sessions_dir),
            idempotency_ttl=config.idempotency_ttl,
            task_event_retention=config.task_event_retention,
        )
        chat = ChatService(models, store, default_max_tokens=config.max_tokens)
        return cls(
            config,
            keys,
            models,
            store,
            chat,
            ChatCompletions(chat),
            Responses(chat, store, models),
            Lmsp.create(chat, store, models, config),
        )

    def openapi(self) -> dict[str, Any]:
        """The OpenAPI document of the served endpoints."""
        return openapi()

    def describe(self) -> str:
        """One line naming the served models and the store, for the start-up log."""
        return f"models: {', '.join(self.models.ids())}; store: {self.config.sessions_dir}"

    async def preload(self) -> None:
        """Load the first model in the background, logging the outcome."""
        model_id = self.models.default_id()
        try:
            await self.models.get(model_id)
            log.info("superfluid: model %s loaded", model_id)
        except Exception as err:  # logged, and answered per request later
            log.warning("superfluid: model %s did not load: %s", model_id, err)

    def model_object(self, model_id: str) -> dict[str, Any]:
        """One model in OpenAI's shape, or 404."""
        if model_id not in self.models.ids():
            raise NotFound(
                f"the model '{model_id}' does not exist", param="model", code="model_not_found"
            )
        return {
            "id": model_id,
            "object": "model",
            "created": self.models.created,
            "owned_by": "superfluid",
            "superfluid": self.models.status(model_id),
        }

    def model_list(self) -> list[dict[str, Any]]:
        """Every served model in OpenAI's shape."""
        return [self.model_object(m) for m in self.models.ids()]

    async def close(self) -> None:
        """Stop the LMSP tasks and the engines, then close the store."""
        await self.lmsp.close()
        await self.models.close()
        await asyncio.to_thread(self.store.close)


def openapi() -> dict[str, Any]:
    """The OpenAPI document of every served route."""
    return openapi_document(all_routes())


def all_routes() -> list[tuple[str, Any]]:
    """Every protocol's URL table."""
    from .lmsp.handlers import routes as lmsp_routes
    from .openai_api.handlers import routes as openai_routes

    return [(r"/v1/openapi.json", OpenAPIHandler), *openai_routes(), *lmsp_routes()]

"""The served models as the chat path and discovery see them.

``ModelHub`` sits on the model lifecycle (``lifecycle.py``: states, downloads, loads)
and answers in client errors: an unknown model is ``model_not_found``; one that is
still downloading or loading is 503 ``model_loading`` with ``Retry-After`` and its
progress in the message; one whose files cannot be had is ``model_unavailable``; one
that cannot be loaded is ``model_load_failed``. It also describes models without
loading them (``peek``: their file's template and trained context).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jupyter_superfluid.chat.codec import ChatCodec
from jupyter_superfluid.errors import (
    APIError,
    EngineUnavailable,
    ModelLoading,
    ModelNotFound,
    ModelUnavailable,
)
from jupyter_superfluid.models.lifecycle import ModelFailed, ModelLifecycle, ModelNotReady
from jupyter_superfluid.models.loaded import FALLBACK_TEMPLATE, LoadedModel
from jupyter_superfluid.models.registry import ModelNotFoundError
from jupyter_superfluid.models.states import ModelState

__all__ = ["LoadedModel", "ModelHub", "PeekedModel"]
ON_DISK = ("available", "loading", "loaded", "unloaded")


@dataclass(frozen=True)
class PeekedModel:
    """A model as its file describes it: its template's codec and trained context."""

    codec: ChatCodec
    context_size: int | None  # None when the file does not say


class ModelHub:
    """Resolves model ids to loaded models, in client errors; reports their states."""

    def __init__(self, lifecycle: ModelLifecycle) -> None:
        self.lifecycle = lifecycle
        self.registry = lifecycle.registry
        self.created = int(time.time())
        self._peeked: dict[tuple[str, str], PeekedModel | None] = {}

    def ids(self) -> list[str]:
        """Ids of every served model, loaded or not."""
        return self.lifecycle.ids()

    def default_id(self) -> str | None:
        """The first served model (None when none is served)."""
        ids = self.ids()
        return ids[0] if ids else None

    def is_loaded(self, model_id: str) -> bool:
        """Whether ``model_id`` is loaded now."""
        return self.lifecycle.loaded(model_id) is not None

    def state(self, model_id: str) -> ModelState:
        """The lifecycle state of one model (404-worthy ModelNotFound if unknown)."""
        try:
            return self.lifecycle.state(model_id)
        except ModelNotFoundError as err:
            raise ModelNotFound(str(err), param="model") from err

    def status(self, model_id: str) -> dict[str, Any]:
        """State, progress and the engine's counters (prompt tokens evaluated, generated)."""
        state = self.lifecycle.state(model_id).as_dict()
        del state["id"]
        loaded = self.lifecycle.loaded(model_id)
        if loaded is None:
            return {"loaded": False, **state}
        stats = getattr(loaded.engine, "stats", None)
        counters = stats() if callable(stats) else {}
        context = loaded.engine.info.context_size
        return {"loaded": True, **state, "context_size": context, **counters}

    async def get(self, model_id: str) -> LoadedModel:
        """The loaded model ``model_id``, loading it on first use (waiting a little)."""
        try:
            return await self.lifecycle.ready(model_id)
        except ModelNotFoundError as err:
            raise ModelNotFound(str(err), param="model") from err
        except ModelNotReady as err:
            state = err.state
            raise ModelLoading(
                f"{state.describe()}; retry in {state.retry_after} s, or follow "
                "/superfluid/v1/models/events",
                retry_after=state.retry_after,
            ) from err
        except ModelFailed as err:
            message, code = err.state.error or "the model failed", err.state.error_code
            if code == "model_unavailable":
                raise ModelUnavailable(message) from err
            if code is not None and code.startswith("engine_"):  # a remote engine is down
                raise EngineUnavailable(message, code=code) from err
            raise APIError(message, status=503, code="model_load_failed") from err

    async def peek(self, model_id: str) -> PeekedModel | None:
        """What a model's file says without loading it: its template's codec, its context.

        For discovery. From the loaded model when it is loaded; None for a model
        whose files are not on disk yet, so that describing models never downloads.
        """
        loaded = self.lifecycle.loaded(model_id)
        if loaded is not None:
            return PeekedModel(loaded.codec, loaded.engine.info.context_size)
        state = self.lifecycle.state(model_id)
        if state.kind == "llama-server" or (state.kind == "hf" and state.state not in ON_DISK):
            return None  # never download or call out to describe a model
        key = (model_id, state.spec)  # a model removed and added again is read again
        if key not in self._peeked:
            self._peeked[key] = await asyncio.to_thread(self._peek, model_id)
        return self._peeked[key]

    def _peek(self, model_id: str) -> PeekedModel | None:
        try:
            template, trained = _read_header(self.registry.resolve(model_id))
        except Exception:  # a broken or missing file is reported when it is loaded
            return None
        return PeekedModel(ChatCodec(template or FALLBACK_TEMPLATE), trained)

    async def close(self) -> None:
        """Stop downloads and close every loaded engine."""
        await self.lifecycle.close()


def _read_header(path: Path) -> tuple[str | None, int | None]:
    """The chat template and trained context length in a GGUF file's header."""
    from gguf import GGUFReader  # only discovery needs it

    fields = GGUFReader(path).fields

    def value(name: str) -> object:
        field = fields.get(name)
        return field.contents() if field is not None and field.data else None

    arch = value("general.architecture")
    template = value("tokenizer.chat_template")
    trained = value(f"{arch}.context_length")
    return (
        template if isinstance(template, str) else None,
        trained if isinstance(trained, int) else None,
    )

"""The served models: each loaded engine paired with its chat codec.

``ModelHub`` sits between the engine registry (files, downloads, loading) and
the chat path: it maps registry errors to client errors and builds each
model's codec once, probing its template at load.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from pathlib import Path

from ..chat.codec import ChatCodec
from ..engine.base import Engine, EngineError, EngineUnavailableError, ModelLoadError
from ..engine.registry import ModelNotFoundError, ModelRegistry, ModelUnavailableError
from ..errors import APIError, EngineUnavailable, ModelNotFound, ModelUnavailable


@dataclass(frozen=True)
class LoadedModel:
    """A model ready to serve: its engine and the codec of its chat template."""

    id: str
    engine: Engine
    codec: ChatCodec


@dataclass(frozen=True)
class PeekedModel:
    """A model as its file describes it: its template's codec and trained context."""

    codec: ChatCodec
    context_size: int | None  # None when the file does not say


class ModelHub:
    """Resolves model ids to loaded models, each loaded and probed once."""

    def __init__(self, registry: ModelRegistry) -> None:
        self.registry = registry
        self.created = int(time.time())
        self._loaded: dict[str, LoadedModel] = {}
        self._peeked: dict[str, PeekedModel | None] = {}
        self._lock = asyncio.Lock()

    def ids(self) -> list[str]:
        """Ids of every served model, loaded or not."""
        return list(self.registry.ids())

    def default_id(self) -> str:
        """The first configured model."""
        return self.ids()[0]

    def is_loaded(self, model_id: str) -> bool:
        """Whether ``model_id`` is loaded now."""
        return model_id in self._loaded

    def status(self, model_id: str) -> dict[str, object]:
        """Load state and the engine's counters (prompt tokens evaluated, tokens generated)."""
        loaded = self._loaded.get(model_id)
        if loaded is None:
            return {"loaded": False}
        stats = getattr(loaded.engine, "stats", None)
        counters = stats() if callable(stats) else {}
        return {"loaded": True, "context_size": loaded.engine.info.context_size, **counters}

    async def get(self, model_id: str) -> LoadedModel:
        """The loaded model ``model_id``, loading it on first use."""
        if model_id in self._loaded:
            return self._loaded[model_id]
        async with self._lock:
            if model_id not in self._loaded:
                engine = await self._load(model_id)
                info = engine.info
                codec = await asyncio.to_thread(
                    ChatCodec,
                    info.chat_template or _FALLBACK_TEMPLATE,
                    bos_token=info.bos_token,
                    eos_token=info.eos_token,
                )
                self._loaded[model_id] = LoadedModel(model_id, engine, codec)
        return self._loaded[model_id]

    async def peek(self, model_id: str) -> PeekedModel | None:
        """What a model's file says without loading it: its template's codec, its context.

        For discovery. From the loaded model when it is loaded; None for a model
        from the hub that is not, so that describing models never downloads one.
        """
        if model_id in self._loaded:
            loaded = self._loaded[model_id]
            return PeekedModel(loaded.codec, loaded.engine.info.context_size)
        if model_id not in self._peeked:
            self._peeked[model_id] = await asyncio.to_thread(self._peek, model_id)
        return self._peeked[model_id]

    def _peek(self, model_id: str) -> PeekedModel | None:
        try:
            spec = self.registry.spec(model_id)
            if spec.kind in ("hf", "llama-server"):  # never download or call out to describe
                return None
            template, trained = _read_header(self.registry.resolve(model_id))
        except Exception:  # a broken or missing file is reported when it is loaded
            return None
        return PeekedModel(ChatCodec(template or _FALLBACK_TEMPLATE), trained)

    async def _load(self, model_id: str) -> Engine:
        try:
            return await self.registry.get(model_id)
        except ModelNotFoundError as err:
            raise ModelNotFound(str(err), param="model") from err
        except ModelUnavailableError as err:
            raise ModelUnavailable(str(err)) from err
        except EngineUnavailableError as err:  # a remote engine that cannot be reached
            raise EngineUnavailable(str(err), code=err.code) from err
        except ModelLoadError as err:
            raise APIError(str(err), status=503, code="model_load_failed") from err
        except EngineError as err:
            raise APIError(str(err), status=503, code="model_load_failed") from err

    async def close(self) -> None:
        """Close every loaded engine."""
        await self.registry.close()
        self._loaded.clear()


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


# ChatML, for a GGUF that carries no template of its own.
_FALLBACK_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

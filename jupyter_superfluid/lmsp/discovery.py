"""LMSP discovery: the service document and the models with their capabilities.

``GET /lmsp/v1`` says which protocol versions this service speaks and where
its endpoints are; ``GET /lmsp/v1/models[/{id}]`` describes each model: its
capabilities (from its chat codec), context window, output cap and its
lifecycle state (``not_downloaded``, ``downloading`` with its progress,
``available``, ``loading``, ``loaded``, ``failed`` with the reason, ``unloaded``).
Listing never loads a model: a model not loaded yet is described from its file's
header, or, for a model the hub has not downloaded, without the capabilities that
depend on its template (``null`` until it loads).
"""

from __future__ import annotations

from typing import Any

from jupyter_superfluid._version import __version__
from jupyter_superfluid.config import Superfluid
from jupyter_superfluid.errors import NotFound
from jupyter_superfluid.lmsp import capabilities
from jupyter_superfluid.lmsp.protocol import EXTENSION, SUPPORTED_VERSIONS
from jupyter_superfluid.models.hub import ModelHub
from jupyter_superfluid.models.states import ModelState


class Discovery:
    """Describes the service and its models."""

    def __init__(self, models: ModelHub, config: Superfluid) -> None:
        self.models = models
        self.config = config

    def service(self, base: str) -> dict[str, Any]:
        """The service document; ``base`` is this service's ``…/lmsp/v1`` path."""
        return {
            "object": "service",
            "protocol": "lmsp",
            "protocol_versions": list(SUPPORTED_VERSIONS),
            "service": {"name": "jupyter_superfluid", "version": __version__},
            "capabilities": list(capabilities.NAMES),
            "extensions": [EXTENSION],
            "links": {
                "self": base,
                "models": f"{base}/models",
                "responses": f"{base}/responses",
                "tasks": f"{base}/tasks",
            },
        }

    async def model(self, model_id: str) -> dict[str, Any]:
        """One model, or 404 ``model_not_found``."""
        if model_id not in self.models.ids():
            raise NotFound(
                f"the model '{model_id}' is not served here",
                param="model_id",
                code="model_not_found",
            )
        peeked = await self.models.peek(model_id)
        caps: dict[str, bool | None]
        if peeked is not None:
            caps = dict(capabilities.model_capabilities(peeked.codec))
        else:
            caps = {name: True for name in capabilities.NAMES}
            caps.update(tools=None, reasoning=None)  # known once its template is read
        # The engine caps each conversation's window at the model's trained length; a
        # loaded engine knows its window (a remote engine's is the remote's own).
        window = self.config.context_size
        if peeked is not None and peeked.context_size:
            loaded = self.models.is_loaded(model_id)
            window = peeked.context_size if loaded else min(window, peeked.context_size)
        return {
            "id": model_id,
            "object": "model",
            "capabilities": caps,
            "context_window": window,
            "max_output_tokens": min(self.config.max_tokens or window, window),
            **_lifecycle_fields(self.models.state(model_id)),
        }

    async def listing(self) -> dict[str, Any]:
        """Every served model."""
        return {"object": "list", "data": [await self.model(m) for m in self.models.ids()]}


def _lifecycle_fields(state: ModelState) -> dict[str, Any]:
    """Where the model is: its state, download progress and failure, as everywhere."""
    wire = state.as_dict()
    return {"state": wire["state"], "progress": wire["progress"], "error": wire["error"]}

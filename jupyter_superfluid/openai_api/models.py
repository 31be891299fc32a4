"""``/v1/models``: the served models in OpenAI's shape."""

from __future__ import annotations

from typing import Any

from jupyter_superfluid.errors import NotFound
from jupyter_superfluid.models.hub import ModelHub


def model_object(models: ModelHub, model_id: str) -> dict[str, Any]:
    """One model in OpenAI's shape, or 404."""
    if model_id not in models.ids():
        raise NotFound(
            f"the model '{model_id}' does not exist", param="model", code="model_not_found"
        )
    return {
        "id": model_id,
        "object": "model",
        "created": models.created,
        "owned_by": "superfluid",
        "superfluid": models.status(model_id),
    }


def model_list(models: ModelHub) -> dict[str, Any]:
    """Every served model, in OpenAI's list shape."""
    return {"object": "list", "data": [model_object(models, m) for m in models.ids()]}

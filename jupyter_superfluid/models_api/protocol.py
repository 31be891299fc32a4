"""The typed request bodies of the models API."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

MAX_EVENT_ID = 2**63 - 1


class AddModelRequest(BaseModel):
    """``POST /superfluid/v1/models``: serve one more model."""

    model_config = ConfigDict(strict=True, extra="forbid")

    spec: str = Field(
        min_length=1,
        max_length=4096,
        description="A model spec as --model takes it: hf:OWNER/REPO/FILE.gguf, a .gguf "
        "path on the server, a built-in model, or llama-server:URL; optionally ID=… and "
        ";mmproj=….",
    )
    load: bool = Field(False, description="Also load it once its files are here.")


class RemoveQuery(BaseModel):
    """``DELETE /superfluid/v1/models/{id}?delete_files=…`` (a query string, so not strict)."""

    model_config = ConfigDict(extra="ignore")

    delete_files: bool = Field(
        False, description="Also delete its files from the Hugging Face cache."
    )


class EventsQuery(BaseModel):
    """``GET /superfluid/v1/models/events?after=…&model=…``."""

    model_config = ConfigDict(extra="ignore")

    after: int | None = Field(None, ge=0, le=MAX_EVENT_ID, description="Resume after this id.")
    model: str | None = Field(None, min_length=1, max_length=512, description="Only this model.")

"""``/v1/openapi.json`` describes every served endpoint and is a valid OpenAPI document."""

from __future__ import annotations

import asyncio

import httpx
from openapi_spec_validator import validate

from jupyter_superfluid.composition import Composition
from jupyter_superfluid.config import Superfluid
from jupyter_superfluid.web.openapi import openapi_path


def served_paths(tmp_path) -> set[str | None]:
    """The OpenAPI paths of every route a composition serves."""
    parts = Composition.build(
        Superfluid(sessions_dir=str(tmp_path), models=["superfluid/tiny-chatml"])
    )
    try:
        return {openapi_path(pattern) for pattern, _, _ in parts.routes()} - {None}
    finally:
        asyncio.run(parts.close())


def test_openapi_document_is_valid_and_complete(standalone, tmp_path):
    doc = httpx.get(standalone.base_url + "/openapi.json", timeout=30).json()
    validate(doc)
    served = served_paths(tmp_path)
    assert served == set(doc["paths"])
    assert {"/v1/responses", "/v1/chat/completions", "/lmsp/v1/tasks/{task_id}/events"} <= served
    assert "/v1/completions" in served
    legacy = doc["paths"]["/v1/completions"]["post"]
    ref = legacy["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    fields = doc["components"]["schemas"][ref.rsplit("/", 1)[1]]["properties"]
    assert {"model", "prompt", "suffix", "stream_options"} <= set(fields)
    create = doc["paths"]["/v1/responses"]["post"]
    ref = create["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    schema = doc["components"]["schemas"][ref.rsplit("/", 1)[1]]
    assert {"model", "input", "previous_response_id"} <= set(schema["properties"])
    assert set(doc["paths"]["/v1/responses/{response_id}"]) == {"get", "delete"}

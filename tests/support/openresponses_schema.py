"""The published OpenResponses schema (from the ``openresponses-py`` package), as validators.

``validate_response`` checks a Responses body (``ResponseResource``);
``validate_event`` checks one stream event against the schema of its type.
"""

from __future__ import annotations

import copy
import json
from functools import cache
from importlib import resources
from typing import Any

from jsonschema import Draft202012Validator

SPEC = "openapi/2026-04-24.json"
# The spec names reasoning-text events as OpenResponses does; this server streams them
# under the OpenAI names its contract gives (spec/openai-responses.txt), same fields.
EVENT_ALIASES = {
    "response.reasoning_text.delta": "response.reasoning.delta",
    "response.reasoning_text.done": "response.reasoning.done",
}


@cache
def spec() -> dict[str, Any]:
    """The OpenAPI document, with its one known defect mended."""
    doc = json.loads((resources.files("openresponses") / SPEC).read_text())
    doc = copy.deepcopy(doc)
    # The JSON lost the object branch of JsonSchemaResponseFormat.schema, which the
    # spec's own zod source has (z.union([z.object({}), z.null()])): an echoed schema
    # object is valid there, and is what OpenAI echoes.
    fmt = doc["components"]["schemas"]["JsonSchemaResponseFormat"]["properties"]
    fmt["schema"] = {"anyOf": [{"type": "object"}, {"type": "null"}]}
    return doc


@cache
def validator(name: str) -> Draft202012Validator:
    """A validator of one component schema."""
    root = {"$ref": f"#/components/schemas/{name}", "components": spec()["components"]}
    return Draft202012Validator(root)


@cache
def event_schemas() -> dict[str, str]:
    """Event type → the component schema of that event."""
    content = spec()["paths"]["/responses"]["post"]["responses"]["200"]["content"]
    out = {}
    for ref in content["text/event-stream"]["schema"]["oneOf"]:
        name = ref["$ref"].rsplit("/", 1)[1]
        (kind,) = spec()["components"]["schemas"][name]["properties"]["type"]["enum"]
        out[kind] = name
    return out


def errors_of(name: str, value: Any) -> list[str]:
    """Every way ``value`` fails the component schema ``name``."""
    return [
        f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
        for e in validator(name).iter_errors(value)
    ]


def validate_response(body: dict[str, Any]) -> None:
    """``body`` is a valid ``ResponseResource``."""
    problems = errors_of("ResponseResource", body)
    assert not problems, (problems, body)


def validate_event(event: dict[str, Any]) -> None:
    """``event`` is a valid stream event of its type."""
    kind = EVENT_ALIASES.get(event["type"], event["type"])
    assert kind in event_schemas(), f"no OpenResponses event of type {event['type']}"
    problems = errors_of(event_schemas()[kind], {**event, "type": kind})
    assert not problems, (problems, event)

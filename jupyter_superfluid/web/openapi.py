"""``GET /v1/openapi.json``: an OpenAPI 3.1 document derived from the served route tables.

Paths, methods and summaries come from the handlers themselves (their
docstrings), and request bodies from the pydantic models handlers declare in
``request_models``, so the document cannot drift from what is served.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel
from tornado.web import RequestHandler

from jupyter_superfluid._version import __version__
from jupyter_superfluid.web.base import Access, ProtocolHandler, Route

METHODS = ("get", "post", "delete")
ERROR = {"description": "An error, in the protocol's own shape (OpenAI error or RFC 9457)."}


def openapi_path(pattern: str) -> str | None:
    """``/v1/responses/(?P<response_id>[^/]+)`` → ``/v1/responses/{response_id}``."""
    if pattern.endswith(".*"):
        return None  # a catch-all that only answers 404
    path = re.sub(r"\(\?P<(\w+)>[^)]*\)", r"{\1}", pattern)
    return path.removesuffix("/?") or "/"


def _operation(handler: type, method: str, path: str, schemas: dict[str, Any]) -> dict[str, Any]:
    fn = getattr(handler, method)
    summary = (fn.__doc__ or handler.__doc__ or "").strip().splitlines()[0]
    op: dict[str, Any] = {
        "summary": summary,
        "operationId": f"{method}_{re.sub(r'[^a-zA-Z0-9]+', '_', path).strip('_')}",
        "responses": {"200": {"description": "OK"}, "4XX": ERROR},
    }
    params = re.findall(r"{(\w+)}", path)
    if params:
        op["parameters"] = [
            {"name": p, "in": "path", "required": True, "schema": {"type": "string"}}
            for p in params
        ]
    model: type[BaseModel] | None = getattr(handler, "request_models", {}).get(method)
    if model is not None:
        schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
        schemas.update(schema.pop("$defs", {}))
        schemas[model.__name__] = schema
        op["requestBody"] = {
            "required": True,
            "content": {
                "application/json": {"schema": {"$ref": f"#/components/schemas/{model.__name__}"}}
            },
        }
    return op


def openapi_document(routes: Sequence[Route]) -> dict[str, Any]:
    """The OpenAPI document of ``routes``."""
    paths: dict[str, Any] = {}
    schemas: dict[str, Any] = {}
    for pattern, handler, _ in routes:
        path = openapi_path(pattern)
        if path is None:
            continue
        ops = {
            m: _operation(handler, m, path, schemas)
            for m in METHODS
            if getattr(handler, m) is not getattr(RequestHandler, m)
        }
        if ops:
            paths[path] = ops
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "jupyter_superfluid",
            "version": __version__,
            "description": "OpenAI-compatible and LMSP 1.0 endpoints over one local model.",
        },
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}],
    }


class OpenAPIHandler(ProtocolHandler):
    """``GET /v1/openapi.json``."""

    def initialize(self, access: Access, document: dict[str, Any]) -> None:
        """Receive the document (built once from the served route table)."""
        self.access, self.document = access, document

    async def get(self) -> None:
        """The OpenAPI document of every served endpoint."""
        self.write_json(self.document)


def routes(*, served: Sequence[Route]) -> list[Route]:
    """``/v1/openapi.json``, describing ``served`` and itself."""
    route: Route = (r"/v1/openapi.json", OpenAPIHandler, {})
    document = openapi_document([route, *served])
    route[2]["document"] = document
    return [route]

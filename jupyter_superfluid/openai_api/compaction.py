"""``POST /v1/responses/compact``: a conversation in fewer tokens, summarised by the model.

The conversation is the request's ``input`` and/or the stored one its
``previous_response_id`` ends (resolved, warm, as create resolves it). The model
itself writes the summary: one turn over the conversation followed by a user
message with the fixed ``SUMMARY_INSTRUCTION``, at most ``SUMMARY_TOKENS``
tokens, nothing stored. The answer is a ``response.compaction`` object whose
``output`` is, in order:

1. one ``compaction`` item: the summary as an opaque blob signed by this server
   (``compaction_blob``), which only this server can expand;
2. kept verbatim: the conversation's last ``user`` message, then every
   ``function_call`` and ``function_call_output`` item after its last
   ``assistant`` message (a tool round still open), as they were given or stored.

The summary comes first because it stands for everything before the kept
items. Sent as the ``input`` of a new response (with the new input after it),
the compaction item expands to a ``developer`` message holding the summary.
``usage`` is the summary turn's. ``model`` is required (400 ``param: model``).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, ClassVar

from pydantic import BaseModel, Field

from jupyter_superfluid.errors import InvalidRequest
from jupyter_superfluid.generation.stored_turns import SilentEncoder
from jupyter_superfluid.generation.wire import Wire
from jupyter_superfluid.openai_api.compaction_blob import CompactionSigner
from jupyter_superfluid.openai_api.handlers import OpenAIHandler
from jupyter_superfluid.openai_api.protocol import Text, parse
from jupyter_superfluid.openai_api.responses import Responses
from jupyter_superfluid.openai_api.stored import usage_body
from jupyter_superfluid.store import new_id
from jupyter_superfluid.web.auth import Principal
from jupyter_superfluid.web.base import Access, Route

SUMMARY_TOKENS = 200
SUMMARY_INSTRUCTION = (
    "Summarize the conversation so far for your own later use, as briefly as you can: "
    "the facts, names, decisions and open questions, and what the user asked last. "
    "Write only the summary."
)
TOOL_ITEMS = ("function_call", "function_call_output")


class CompactRequest(Wire):
    """``POST /v1/responses/compact`` (``input`` is checked as create checks it)."""

    model: str | None = Field(default=None, min_length=1, max_length=512)
    input: Any = None
    previous_response_id: str | None = Field(default=None, min_length=1, max_length=256)
    instructions: Text | None = None
    prompt_cache_key: str | None = Field(default=None, max_length=512)


class Compaction:
    """Compact a conversation into a signed summary and the items kept verbatim."""

    def __init__(self, responses: Responses, signer: CompactionSigner) -> None:
        self.responses = responses
        self.signer = signer

    async def compact(self, body: dict[str, Any], principal: Principal) -> dict[str, Any]:
        """The ``response.compaction`` object of ``body``'s conversation."""
        req = parse(CompactRequest, body)
        if not req.model:
            raise InvalidRequest("model is required", param="model")
        if req.input is None and req.previous_response_id is None:
            raise InvalidRequest("input or previous_response_id is required", param="input")
        own = _items(req.input)
        summary_body: dict[str, Any] = {
            "model": req.model,
            "input": [*own, {"role": "user", "content": SUMMARY_INSTRUCTION}],
            "store": False,
            "max_output_tokens": SUMMARY_TOKENS,
        }
        for key in ("previous_response_id", "instructions"):
            if getattr(req, key) is not None:
                summary_body[key] = getattr(req, key)
        _, pt = await self.responses.prepare(summary_body, principal)
        resp = await self.responses.turns.complete(pt, SilentEncoder())
        history = await self._history(req.previous_response_id, principal) + own
        blob = self.signer.sign(
            {"summary": _text(resp.output), "model": resp.model, "created_at": int(time.time())}
        )
        compaction = {"id": new_id("cmp_"), "type": "compaction", "encrypted_content": blob}
        return {
            "id": pt.id,
            "object": "response.compaction",
            "created_at": pt.created_at,
            "output": [compaction, *kept_items(history)],
            "usage": usage_body(resp),
        }

    async def _history(self, previous_id: str | None, principal: Principal) -> list[Any]:
        """The stored conversation's items, root first (none without a previous response)."""
        if previous_id is None:
            return []
        store = self.responses.turns.store
        chain = await asyncio.to_thread(store.response_chain, previous_id, principal.owner)
        return [item for rec in chain for item in (*rec.input_items, *rec.output_items)]


def kept_items(history: list[Any]) -> list[dict[str, Any]]:
    """The last user message, then the tool items after the last assistant message."""
    last_user = last_assistant = -1
    for i, item in enumerate(history):
        if _role(item) == "user":
            last_user = i
        elif _role(item) == "assistant":
            last_assistant = i
    kept = [history[last_user]] if last_user >= 0 else []
    tail = history[last_assistant + 1 :]
    return kept + [i for i in tail if isinstance(i, dict) and i.get("type") in TOOL_ITEMS]


def _role(item: Any) -> str | None:
    if not isinstance(item, dict) or item.get("type", "message") != "message":
        return None
    role = item.get("role")
    return role if isinstance(role, str) else None


def _items(raw: Any) -> list[Any]:
    if raw is None:
        return []
    if isinstance(raw, str):
        return [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": raw}]}
        ]
    if not isinstance(raw, list):
        raise InvalidRequest("input must be a string or an array of items", param="input")
    return list(raw)


def _text(output: tuple[dict[str, Any], ...]) -> str:
    """The summary's text: its message text (else, from a model that only reasoned, that)."""
    for kind in ("message", "reasoning"):
        parts = [p for item in output if item.get("type") == kind for p in item["content"]]
        text = "".join(p.get("text", "") for p in parts).strip()
        if text:
            return text
    return ""


class CompactHandler(OpenAIHandler):
    """``POST /v1/responses/compact``."""

    scope = {"POST": "responses:write"}
    request_models: ClassVar[dict[str, type[BaseModel]]] = {"post": CompactRequest}

    def initialize(self, access: Access, compaction: Compaction) -> None:
        """Receive the compaction service."""
        self.access, self.compaction = access, compaction

    async def post(self) -> None:
        """Compact the conversation of the body."""
        self.write_json(await self.compaction.compact(self.json_body(), self.principal))


def routes(*, compaction: Compaction) -> list[Route]:
    """The route, to be served before ``/v1/responses/{id}`` (which would take its name)."""
    return [(r"/v1/responses/compact", CompactHandler, {"compaction": compaction})]

"""What a ``%%respond`` cell does, without IPython's parsing: defaults, conversation, rounds.

``NotebookSession`` (one per shell) holds the defaults set with ``%respond`` and the
notebook's current conversation (the last response a cell produced). ``run`` sends one
cell: it resolves the model, streams each round to the renderer, runs the tools the
model calls and sends their outputs back until the model answers (bounded by
``max_rounds``), and parses structured output. A request answered 503 ``model_loading``
(the model is downloading or loading) shows the model's progress to the renderer
(``superfluid.model_waiting`` events, from the models event stream) and is sent again
once the model is ready.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from jupyter_superfluid.notebook.client import ENV_MODEL, Endpoint, client, find_server
from jupyter_superfluid.notebook.lmsp import run_lmsp
from jupyter_superfluid.notebook.render import WAITING_EVENT, RenderMeta, StreamRenderer
from jupyter_superfluid.notebook.result import Reply, ToolResult
from jupyter_superfluid.notebook.tools import Tool, call_tool
from jupyter_superfluid.notebook.transport import run_openai

DEFAULT_MAX_ROUNDS = 4
MAX_WAITS = 20  # 503 model_loading answers one cell waits through


class RespondFailure(Exception):
    """A cell failed for a reason worth one readable line."""


@dataclass
class Settings:
    """Per-cell options that ``%respond`` can also set as defaults."""

    model: str | None = None
    instructions: str | None = None
    reasoning: str | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    seed: int | None = None
    max_rounds: int | None = None
    no_stream: bool | None = None
    lmsp: bool | None = None

    def over(self, base: Settings) -> Settings:
        """These settings, with ``base`` filling what is unset."""
        merged = {f.name: getattr(self, f.name) for f in fields(self)}
        for name, value in merged.items():
            if value is None:
                merged[name] = getattr(base, name)
        return Settings(**merged)

    def given(self) -> dict[str, Any]:
        """The settings that are set."""
        return {f.name: v for f in fields(self) if (v := getattr(self, f.name)) is not None}

    def response_params(self) -> dict[str, Any]:
        """These settings as Responses parameters (those that are set)."""
        params: dict[str, Any] = {
            "model": self.model,
            "instructions": self.instructions,
            "max_output_tokens": self.max_tokens,
            "temperature": self.temperature,
            "seed": self.seed,
        }
        if self.reasoning:
            params["reasoning"] = {"effort": self.reasoning}
        return {k: v for k, v in params.items() if v is not None}


@dataclass
class Schema:
    """Structured output: the ``text.format`` to send and how to read the answer."""

    name: str
    json_schema: dict[str, Any]
    model: Any = None  # a pydantic model class, or None for a plain JSON schema

    def format(self) -> dict[str, Any]:
        """The Responses ``text.format``."""
        return {"type": "json_schema", "name": self.name, "schema": self.json_schema}

    def parse(self, reply: Reply) -> Any:
        """The validated pydantic object or dict; RespondFailure when it does not validate."""
        text = reply.output_text
        if reply.data.get("status") == "incomplete":
            raise RespondFailure(
                f"the output was cut at the token limit, so it is not a whole {self.name} "
                f"(response {reply.id}); raise --max-tokens"
            )
        try:
            if self.model is not None:
                return self.model.model_validate_json(text)
            value = json.loads(text)
            import jsonschema

            jsonschema.validate(value, self.json_schema)
            return value
        except Exception as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise RespondFailure(
                f"the output does not validate as {self.name} (response {reply.id}): {first}"
            ) from None


@dataclass
class CellRequest:
    """One cell, with its options resolved against the namespace."""

    input: str
    settings: Settings
    previous_response_id: str | None
    schema: Schema | None = None
    tools: list[Tool] = field(default_factory=list)
    tool_choice: str | dict[str, Any] = "auto"


@dataclass
class NotebookSession:
    """The magic's state in one shell: defaults and the current conversation."""

    defaults: Settings = field(default_factory=Settings)
    last: Reply | None = None  # the last reply a cell produced (the conversation's head)
    head: str | None = None  # the response id the next cell continues; None: a new one
    _clients: dict[tuple[str, str], Any] = field(default_factory=dict)
    _models: dict[str, str] = field(default_factory=dict)

    def client(self, ep: Endpoint) -> Any:
        """One SDK client per endpoint; no retries, so errors show at once."""
        key = (ep.base_url, ep.api_key)
        if key not in self._clients:
            self._clients[key] = client(base_url=ep.base_url, api_key=ep.api_key, max_retries=0)
        return self._clients[key]

    def model_for(self, ep: Endpoint, settings: Settings, previous: str | None) -> str | None:
        """The model to ask for; None lets the server continue with the previous one."""
        chosen = settings.model or os.environ.get(ENV_MODEL, "").strip() or None
        if chosen:
            return chosen
        if previous and not settings.lmsp:
            return None  # the server defaults to the previous response's model
        if previous:  # LMSP requires a model: take the one the conversation used
            if self.last is not None and self.last.id == previous:
                return str(self.last.data.get("model"))
            return str(self.client(ep).responses.retrieve(previous).model)
        if ep.base_url not in self._models:
            served = [m.id for m in self.client(ep).models.list()]
            if not served:
                raise RespondFailure(f"the server at {ep.base_url} serves no models")
            self._models[ep.base_url] = served[0]
        return self._models[ep.base_url]

    def run(self, req: CellRequest, renderer: StreamRenderer) -> Reply:
        """Send the cell, run the tool loop, and make its last reply the conversation head."""
        ep = find_server()
        settings = req.settings
        model = self.model_for(ep, settings, req.previous_response_id)
        renderer.start(
            RenderMeta(
                model=model,
                previous_response_id=req.previous_response_id,
                input=req.input,
                stream=not settings.no_stream,
                protocol="lmsp" if settings.lmsp else "openai",
                options=settings.given(),
            )
        )
        reply = self._rounds(ep, req, model, renderer)
        self.last, self.head = reply, reply.id
        return reply

    def _rounds(
        self, ep: Endpoint, req: CellRequest, model: str | None, renderer: StreamRenderer
    ) -> Reply:
        """Request, run the calls, send their outputs back; at most ``max_rounds`` requests."""
        max_rounds = req.settings.max_rounds or DEFAULT_MAX_ROUNDS
        by_name = {tool.name: tool for tool in req.tools}
        params = self._params(req, model)
        earlier: list[Reply] = []
        results: list[ToolResult] = []
        for number in range(1, max_rounds + 1):
            if req.tools and number > 1:
                # After the first round the model may answer; the last round must.
                params["tool_choice"] = "none" if number == max_rounds else "auto"
            reply = Reply(self._one(ep, params, req.settings, renderer))
            calls = reply.function_calls
            # A call cut by the token limit is not safe to run.
            cut = reply.data.get("status") == "incomplete"
            if not (calls and by_name) or cut or number == max_rounds:
                break
            outputs = []
            for call in calls:
                result = _run_call(by_name, call)
                results.append(result)
                renderer.on_event({"type": "superfluid.tool_output", **vars(result)})
                outputs.append(
                    {
                        "type": "function_call_output",
                        "call_id": result.call_id,
                        "output": result.output,
                    }
                )
            earlier.append(reply)
            params.update(input=outputs, previous_response_id=reply.id, model=model)
        return Reply(reply.response, earlier, results)

    def _params(self, req: CellRequest, model: str | None) -> dict[str, Any]:
        """The Responses parameters of the first round."""
        params: dict[str, Any] = {
            **req.settings.response_params(),
            "model": model,
            "input": req.input,
            "previous_response_id": req.previous_response_id,
        }
        if req.schema is not None:
            params["text"] = {"format": req.schema.format()}
        if req.tools:
            params["tools"] = [tool.spec for tool in req.tools]
            params["tool_choice"] = req.tool_choice
        return params

    def _one(
        self, ep: Endpoint, params: Mapping[str, Any], s: Settings, renderer: StreamRenderer
    ) -> Any:
        """One round; while the model downloads or loads, its progress, then the round again."""
        for _ in range(MAX_WAITS):
            try:
                return self._send(ep, params, s, renderer)
            except Exception as exc:
                if not model_loading(exc):
                    raise
            self._wait_for_model(ep, self._model_of(ep, params), renderer)
        raise RespondFailure(f"the model of this cell did not get ready after {MAX_WAITS} waits")

    def _send(
        self, ep: Endpoint, params: Mapping[str, Any], s: Settings, renderer: StreamRenderer
    ) -> Any:
        """One request through the chosen protocol: an SDK Response, or an LMSP dict."""
        stream = not s.no_stream
        if s.lmsp:
            return run_lmsp(
                ep.lmsp_url, ep.api_key, params, stream=stream, on_event=renderer.on_event
            )
        return run_openai(self.client(ep), params, stream=stream, on_event=renderer.on_event)

    def _model_of(self, ep: Endpoint, params: Mapping[str, Any]) -> str:
        """The model a request asks for (a continuation's, when it names none)."""
        if params.get("model"):
            return str(params["model"])
        previous = str(params.get("previous_response_id") or "")
        if self.last is not None and self.last.id == previous:
            return str(self.last.data.get("model"))
        return str(self.client(ep).responses.retrieve(previous).model)

    def _wait_for_model(self, ep: Endpoint, model: str, renderer: StreamRenderer) -> None:
        """Show the model's download or load until it settles; RespondFailure if it fails."""
        from jupyter_superfluid.notebook.models import ModelsError, wait_until_ready

        def show(state: Mapping[str, Any]) -> None:
            renderer.on_event({"type": WAITING_EVENT, "model": dict(state)})

        try:
            wait_until_ready(model, show, ep)
        except ModelsError as exc:
            raise RespondFailure(str(exc)) from None


def model_loading(exc: BaseException) -> bool:
    """Whether a request was answered 503 ``model_loading`` (the model is not ready yet)."""
    import openai

    from jupyter_superfluid.notebook.lmsp import LmspError

    if isinstance(exc, LmspError):
        return exc.status == 503 and exc.code == "model_loading"
    if isinstance(exc, openai.APIStatusError):
        body = exc.body if isinstance(exc.body, Mapping) else {}
        return exc.status_code == 503 and (body.get("code") or exc.code) == "model_loading"
    return False


def _run_call(tools: Mapping[str, Tool], call: Mapping[str, Any]) -> ToolResult:
    """Run one function call in the kernel; unknown names answer with an error text."""
    name = str(call.get("name"))
    arguments = str(call.get("arguments") or "")
    tool = tools.get(name)
    output = call_tool(tool, arguments) if tool else f"unknown tool {name!r}"
    return ToolResult(str(call.get("call_id")), name, arguments, output)

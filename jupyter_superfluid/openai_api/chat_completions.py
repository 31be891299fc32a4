"""``/v1/chat/completions``: translate to the neutral chat request, serialize its events."""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import AsyncGenerator
from typing import Any

from jupyter_superfluid.chat.types import (
    ChatMessage,
    ChatRequest,
    ChatSampling,
    Finished,
    ItemStarted,
    MediaInput,
    OutputFormat,
    PromptProcessed,
    TextDelta,
    ToolCall,
    ToolChoice,
    ToolSpec,
)
from jupyter_superfluid.errors import APIError, InvalidRequest, generation_error
from jupyter_superfluid.generation.media import MEDIA_MARKER, audio_part, image_url_part
from jupyter_superfluid.generation.service import ChatService, Turn, TurnResult
from jupyter_superfluid.openai_api.protocol import (
    ChatAudioPart,
    ChatCompletionRequest,
    ChatImagePart,
    ChatMessageParam,
    ChatTextPart,
    ImageURL,
    ResponseFormatJsonSchema,
    parse,
)
from jupyter_superfluid.validation import check_schema
from jupyter_superfluid.web.answer import Answer
from jupyter_superfluid.web.sse import SSE

ROLES = {
    "system": "system",
    "developer": "system",
    "user": "user",
    "assistant": "assistant",
    "tool": "tool",
}


def content_parts(content: Any, param: str) -> tuple[str, tuple[MediaInput, ...]]:
    """A message's content: text parts joined, each image or audio part as MEDIA_MARKER."""
    if content is None:
        return "", ()
    if isinstance(content, str):
        return content, ()
    texts: list[str] = []
    media: list[MediaInput] = []
    for j, part in enumerate(content):
        at = f"{param}[{j}]"
        if isinstance(part, ChatTextPart):
            texts.append(part.text)
            continue
        if isinstance(part, ChatImagePart):
            image = part.image_url
            if isinstance(image, ImageURL):
                media.append(image_url_part(image.url, at, f"{at}.image_url.url"))
            else:
                media.append(image_url_part(image, at, f"{at}.image_url"))
        elif isinstance(part, ChatAudioPart):
            media.append(audio_part(part.model_dump(), at))
        else:
            raise InvalidRequest(
                f"{at}: file parts are not supported ({part.type})",
                param=at,
                code="unsupported_input",
            )
        texts.append(MEDIA_MARKER)
    return "".join(texts), tuple(media)


def to_message(raw: ChatMessageParam, i: int) -> ChatMessage:
    """One chat-completions message as a neutral ChatMessage."""
    text, media = content_parts(raw.content, f"messages[{i}].content")
    calls = tuple(
        ToolCall(
            call_id=c.id,
            name=c.function.name,
            arguments=c.function.arguments
            if isinstance(c.function.arguments, str)
            else json.dumps(c.function.arguments),
        )
        for c in raw.tool_calls or []
    )
    if raw.role == "tool" and raw.tool_call_id is None:
        raise InvalidRequest(
            "a tool message needs tool_call_id", param=f"messages[{i}].tool_call_id"
        )
    return ChatMessage(
        ROLES[raw.role],  # type: ignore[arg-type]  # one of ROLES' values
        text,
        reasoning=raw.reasoning_content,
        tool_calls=calls,
        tool_call_id=raw.tool_call_id,
        media=media,
    )


def to_chat_request(req: ChatCompletionRequest) -> ChatRequest:
    """The neutral request for a validated chat-completions body."""
    for i, t in enumerate(req.tools or []):
        if t.function.parameters is not None:
            check_schema(t.function.parameters, f"tools[{i}].function.parameters")
    tools = tuple(
        ToolSpec(t.function.name, t.function.description, t.function.parameters)
        for t in req.tools or []
    )
    stop = (req.stop,) if isinstance(req.stop, str) else tuple(req.stop or ())
    return ChatRequest(
        model=req.model,
        messages=tuple(to_message(m, i) for i, m in enumerate(req.messages)),
        tools=tools,
        tool_choice=_tool_choice(req.tool_choice, tools),
        output_format=_format(req),
        sampling=ChatSampling(
            req.temperature,
            req.top_p,
            req.seed,
            req.max_completion_tokens or req.max_tokens,
            stop,
            tuple((req.logit_bias or {}).items()),
        ),
        reasoning_effort=req.reasoning_effort,
    )


def _tool_choice(raw: Any, tools: tuple[ToolSpec, ...]) -> ToolChoice:
    if raw is None:
        return ToolChoice("auto")
    if isinstance(raw, str):
        if raw == "required" and not tools:
            raise InvalidRequest("tool_choice 'required' needs tools", param="tool_choice")
        return ToolChoice(raw)  # type: ignore[arg-type]
    name = raw.function.name
    if name not in {t.name for t in tools}:
        raise InvalidRequest(
            f"tool_choice names '{name}', which is not in tools", param="tool_choice"
        )
    return ToolChoice("function", name)


def _format(req: ChatCompletionRequest) -> OutputFormat:
    fmt = req.response_format
    if fmt is None or fmt.type == "text":
        return OutputFormat()
    if fmt.type == "json_object":
        return OutputFormat("json_object")
    assert isinstance(fmt, ResponseFormatJsonSchema)
    param = "response_format.json_schema.schema"
    check_schema(fmt.json_schema.schema_, param)
    return OutputFormat("json_schema", fmt.json_schema.schema_, fmt.json_schema.name, param=param)


def finish_reason(result: TurnResult) -> str:
    """OpenAI's finish_reason for a turn."""
    if result.status == "incomplete":
        return "length"
    if any(i.kind == "function_call" for i in result.items):
        return "tool_calls"
    return "stop"


def usage_body(result: TurnResult) -> dict[str, Any]:
    """Chat completions' usage object."""
    u = result.usage
    return {
        "prompt_tokens": u.input_tokens,
        "completion_tokens": u.output_tokens,
        "total_tokens": u.total_tokens,
        "prompt_tokens_details": {"cached_tokens": u.cached_tokens},
        "completion_tokens_details": {"reasoning_tokens": u.reasoning_tokens},
    }


class ChatCompletions:
    """The chat-completions endpoint's logic, over the one chat path."""

    def __init__(self, chat: ChatService) -> None:
        self.chat = chat

    async def prepare(
        self, body: dict[str, Any], owner: str | None = None
    ) -> tuple[ChatCompletionRequest, Turn]:
        """Validate and render a request (``owner``: the principal's, for its cache salt)."""
        req = parse(ChatCompletionRequest, body)
        return req, await self.chat.prepare(to_chat_request(req), owner=owner)

    async def answer(self, body: dict[str, Any], owner: str | None = None) -> Answer:
        """A chat completion for ``body``: its chunks when it streams, else the object."""
        req, turn = await self.prepare(body, owner)
        if req.stream:
            chunks = self.stream(req, turn)
            return Answer(batches=chunks, warm=lambda: turn.cached_tokens, on_error=stream_error)
        completion = await self.complete(req, turn)
        return Answer(body=completion, warm=lambda: turn.result.usage.cached_tokens)

    async def complete(self, req: ChatCompletionRequest, turn: Turn) -> dict[str, Any]:
        """Run to the end and return the chat.completion object (logged first)."""
        result = await self.chat.collect(turn)
        await self.chat.commit(turn)
        message: dict[str, Any] = {"role": "assistant", "content": None}
        texts = [i.text for i in result.items if i.kind == "message"]
        if texts or not any(i.kind == "function_call" for i in result.items):
            message["content"] = "".join(texts)
        reasoning = "".join(i.text for i in result.items if i.kind == "reasoning")
        if reasoning:
            message["reasoning_content"] = reasoning
        calls = [_call_body(i) for i in result.items if i.kind == "function_call"]
        if calls:
            message["tool_calls"] = calls
        return {
            **_envelope(req, "chat.completion"),
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": finish_reason(result),
                }
            ],
            "usage": usage_body(result),
        }

    async def stream(
        self, req: ChatCompletionRequest, turn: Turn
    ) -> AsyncGenerator[list[SSE], None]:
        """chat.completion.chunk events, one batch per neutral event, then ``[DONE]``."""
        async for chunk in self._chunks(req, turn):
            yield [SSE(chunk)]

    async def _chunks(self, req: ChatCompletionRequest, turn: Turn) -> AsyncGenerator[str, None]:
        env = _envelope(req, "chat.completion.chunk")
        calls: dict[int, int] = {}  # output index → tool_calls index
        # The envelope is the same in every chunk: encoded once, not per token.
        head = json.dumps(env)[:-1] + ', "choices": [{"index": 0, "delta": '
        tail = ', "logprobs": null, "finish_reason": '

        def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
            return f"{head}{json.dumps(delta)}{tail}{json.dumps(finish)}}}]}}"

        events = self.chat.run(turn)
        try:
            async for event in events:
                if isinstance(event, PromptProcessed):
                    yield chunk({"role": "assistant", "content": ""})
                elif isinstance(event, ItemStarted) and event.kind == "function_call":
                    calls[event.index] = len(calls)
                    yield chunk(
                        {
                            "tool_calls": [
                                {
                                    "index": calls[event.index],
                                    "id": event.call_id,
                                    "type": "function",
                                    "function": {"name": event.name, "arguments": ""},
                                }
                            ]
                        }
                    )
                elif isinstance(event, TextDelta) and event.text:
                    yield chunk(_delta(event, calls))
                elif isinstance(event, Finished):
                    if event.status == "failed":
                        yield stream_error(generation_error(event.reason, event.code))[0].data
                        return
                    await self.chat.commit(turn)
                    yield chunk({}, finish_reason(turn.result))
        finally:
            await events.aclose()
        if (req.stream_options or {}).get("include_usage"):
            yield json.dumps({**env, "choices": [], "usage": usage_body(turn.result)})
        yield "[DONE]"


def stream_error(err: APIError) -> list[SSE]:
    """The chunk that ends a chat-completions stream on an error after it began."""
    body = {"message": err.message, "type": err.type, "param": err.param, "code": err.code}
    return [SSE(json.dumps({"error": body}))]


def _delta(event: TextDelta, calls: dict[int, int]) -> dict[str, Any]:
    if event.kind == "function_call":
        return {
            "tool_calls": [
                {"index": calls.get(event.index, 0), "function": {"arguments": event.text}}
            ]
        }
    if event.kind == "reasoning":
        return {"reasoning_content": event.text}
    return {"content": event.text}


def _call_body(item: Any) -> dict[str, Any]:
    return {
        "id": item.call_id,
        "type": "function",
        "function": {"name": item.name, "arguments": item.text},
    }


def _envelope(req: ChatCompletionRequest, kind: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-" + secrets.token_hex(12),
        "object": kind,
        "created": int(time.time()),
        "model": req.model,
        "system_fingerprint": None,
    }

"""vLLM's ``/v1/completions`` dialect: a generation's request body, its chunks as events.

Pure translation, kept apart from the HTTP engine (``vllm``). Field names are those of
vLLM 0.32's OpenAI server (``vllm/entrypoints/openai/completion/protocol.py``):

- the prompt goes as token ids (``prompt: [ids]``), streamed with ``return_token_ids``:
  each chunk's ``token_ids`` are the generated ids, the truth; its ``text`` may be empty
  (vLLM holds back an unfinished UTF-8 character), so text is decoded here from the
  ids when the tokenizer's bytes are known (``TokenBytes``), else taken from the chunk;
- sampling is sent whole (top-k, min-p and penalties off), so the model's
  ``generation_config`` defaults never change its behaviour; a grammar goes as
  ``structured_outputs.grammar`` (llama.cpp GBNF, which xgrammar reads; the older
  ``guided_*`` fields are ignored by vLLM 0.32);
- ``cache_salt`` keeps one principal's prefix-cache blocks from serving another's;
- vLLM counts the prompt tokens its prefix cache served only in the last, usage chunk
  (``usage.prompt_tokens_details.cached_tokens``, with ``--enable-prompt-tokens-details``):
  it reaches the seam as ``GenerationFinished.cached_tokens``, so the first event,
  ``PromptEvaluated``, says 0.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from jupyter_superfluid.engine.base import (
    EngineError,
    EngineEvent,
    GenerateRequest,
    GenerationFinished,
    PromptEvaluated,
    TokenGenerated,
)
from jupyter_superfluid.engine.remote.hf_tokenizer import IncrementalText, TokenBytes

DONE = {"[DONE]": True}  # the chunk the SSE loop passes for ``data: [DONE]``
_REASONS = {"stop": "stop", "length": "length", "abort": "cancelled"}


def completion_body(request: GenerateRequest, model: str, room: int) -> dict[str, Any]:
    """The ``/v1/completions`` body of ``request`` for served ``model`` (``room``: tokens left)."""
    s = request.sampling
    body: dict[str, Any] = {
        "model": model,
        "prompt": list(request.prompt_tokens),
        "stream": True,
        "stream_options": {"include_usage": True},
        "return_token_ids": True,
        "max_tokens": room if s.max_tokens is None else min(s.max_tokens, room),
        "temperature": s.temperature,
        "top_p": s.top_p,
        "top_k": 0,
        "min_p": 0.0,
        "repetition_penalty": 1.0,
        "presence_penalty": 0.0,
        "frequency_penalty": 0.0,
        "skip_special_tokens": False,  # control tokens are parsed here (tool calls, <think>)
        "spaces_between_special_tokens": False,
        "add_special_tokens": False,  # the ids are the whole prompt, BOS included
    }
    if s.seed is not None:
        body["seed"] = s.seed % 2**63
    if s.grammar is not None:
        body["structured_outputs"] = {"grammar": s.grammar}
    if s.logit_bias:
        body["logit_bias"] = {str(int(t)): max(-100.0, float(b)) for t, b in s.logit_bias.items()}
    if request.cache_salt:
        body["cache_salt"] = request.cache_salt
    return body


class VllmRelay:
    """Turns one generation's ``/v1/completions`` chunks into engine events."""

    def __init__(
        self, url: str, n_prompt: int, token_bytes: TokenBytes | None, eog: Collection[int]
    ) -> None:
        self.url = url
        self.n_prompt = n_prompt
        self.started = False  # PromptEvaluated sent
        self.generated = 0
        self._text: IncrementalText | None = token_bytes.decoder() if token_bytes else None
        self._eog = eog
        self._finish: str | None = None

    async def events(self, chunk: dict[str, Any]) -> list[EngineEvent]:
        """The events of one chunk: tokens, or the end once the usage chunk has come."""
        if "error" in chunk:
            error = chunk["error"] if isinstance(chunk["error"], dict) else {}
            message = f"vLLM at {self.url}: {error.get('message', chunk['error'])}"
            unavailable = int(error.get("code") or 0) >= 500
            if not self.started and not unavailable:
                raise EngineError(message)  # refused before it began (a grammar): 400 above
            return [self.failed(message, code="engine_unavailable" if unavailable else None)]
        out: list[EngineEvent] = []
        if not self.started:
            self.started = True
            out.append(PromptEvaluated(self.n_prompt, 0))
        for choice in chunk.get("choices") or ():
            out += self._tokens(choice)
            if choice.get("finish_reason"):
                self._finish = str(choice["finish_reason"])
        usage = chunk.get("usage")
        if self._finish and (usage or chunk is DONE):
            out.append(self._finished(usage or {}))
            self._finish = None
        return out

    def _tokens(self, choice: dict[str, Any]) -> list[TokenGenerated]:
        """The generated tokens of one choice, an end-of-turn token it stopped on left out."""
        ids = [int(t) for t in choice.get("token_ids") or ()]
        if choice.get("finish_reason") == "stop" and ids and ids[-1] in self._eog:
            ids = ids[:-1]  # as the local engine: the end-of-turn token is not text
        self.generated += len(ids)
        if not ids:
            return []
        if self._text is not None:
            return [TokenGenerated(t, self._text.feed(t)) for t in ids]
        text = str(choice.get("text") or "")
        return [TokenGenerated(t, "") for t in ids[:-1]] + [TokenGenerated(ids[-1], text)]

    def _finished(self, usage: dict[str, Any]) -> GenerationFinished:
        """The last event, with the remote's counts."""
        details = usage.get("prompt_tokens_details") or {}
        cached = details.get("cached_tokens")
        reason = _REASONS.get(self._finish or "stop", "stop")
        completion = int(usage.get("completion_tokens", self.generated))
        return GenerationFinished(
            reason,  # type: ignore[arg-type]
            completion,
            cached_tokens=None if cached is None else int(cached),
        )

    def failed(self, message: str, *, code: str | None) -> GenerationFinished:
        """The last event of a generation that failed."""
        return GenerationFinished("error", self.generated, error=message, code=code)

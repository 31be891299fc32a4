"""``LlamaServerEngine``: llama.cpp's ``llama-server`` behind the Engine seam.

Superfluid renders, tokenizes and parses; the remote generates and keeps its own prefix
cache. Prompt texts are tokenized here (``local_encoder``, llama.cpp's tokenizer over the
served GGUF's vocabulary: the file ``/props`` names when it is readable here, else the
spec's ``#tokenizer=PATH``) while its ids are the remote's for a probe text, else by
``/tokenize``; either is cached per text, blocking, called from worker threads. The HTTP
side (clients, staleness, failures, the SSE loop) is ``client.RemoteEngine``'s:

- Prompts go as exact token ids (``/completion``, ``cache_prompt``), so a continuation
  of a stored conversation shares its prefix with what the remote served last and is
  evaluated warm; ``PromptEvaluated.cached_tokens`` is the remote's own count
  (``timings.cache_n``, sent with the first token).
- Sampling is sent whole (``samplers: [top_p, temperature]``, the local chain), so the
  remote's defaults (top-k, min-p, penalties) never change a model's behaviour.
- Generated ids come from ``return_tokens``. llama-server never sends the id of a token
  that ends inside a UTF-8 character (only ``tokens_predicted`` moves): such a run is
  re-tokenized from the text it completes, the same ids whenever that text tokenizes
  canonically (a multi-byte character split into byte tokens does). Control tokens,
  streamed as empty text, get theirs from ``/detokenize``.
- Nothing stays failed: the next call re-reads ``/props`` and goes on, if the remote
  serves the same vocabulary and template (stored conversations hold its token ids).
- ``GenerateRequest.cache_salt`` is not sent: llama-server has no per-user cache
  isolation (``docs/user-guide/remote-engines.md`` says what that exposes).
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncGenerator, Sequence
from pathlib import Path
from typing import Any

from jupyter_superfluid.engine.base import (
    ContextOverflowError,
    EngineError,
    EngineEvent,
    EngineUnavailableError,
    GenerateRequest,
    ModelInfo,
)
from jupyter_superfluid.engine.remote.client import RemoteEngine, error_message
from jupyter_superfluid.engine.remote.llama_completion import CompletionRelay, completion_body
from jupyter_superfluid.engine.remote.local_encoder import LocalEncoder

API_KEY_ENV = "LLAMA_API_KEY"  # the remote's --api-key, when it has one


class LlamaServerEngine(RemoteEngine):
    """A model that a running ``llama-server`` serves, reached over HTTP."""

    kind = "llama-server"

    def __init__(
        self,
        model_id: str,
        url: str,
        *,
        api_key: str | None = None,
        tokenizer: str | Path | None = None,
        **options: Any,
    ) -> None:
        key = api_key if api_key is not None else os.environ.get(API_KEY_ENV)
        super().__init__(model_id, url, api_key=key, **options)
        self._special: dict[int, str] = {}
        self._vocab_file = Path(tokenizer).expanduser() if tokenizer else None
        self._encoder: LocalEncoder | None = None
        self._encoder_file: Path | None = None
        self.local_tokenizing = False  # the encoder gave the remote's ids when last asked

    @classmethod
    def connect(cls, model_id: str, url: str, **options: Any) -> LlamaServerEngine:
        """An engine for the model served at ``url`` (blocking: reads ``/props``).

        Raises EngineUnavailableError, naming the URL, when the remote cannot be reached.
        """
        engine = cls(model_id, url, **options)
        engine.open()
        return engine

    def read_model(self) -> ModelInfo:
        """ModelInfo from ``/props`` and ``/v1/models``; refuse a different vocabulary."""
        try:
            props = self.call("GET", "/props")
            meta = self.call("GET", "/v1/models")["data"][0]["meta"]
            context = int(props["default_generation_settings"]["n_ctx"])
        except (KeyError, IndexError, TypeError, ValueError) as err:
            raise EngineUnavailableError(
                f"{self.url} does not answer as llama-server does (no {err} in /props "
                "or /v1/models)"
            ) from err
        template = props.get("chat_template") or None
        bos, eos = props.get("bos_token", ""), props.get("eos_token", "")
        identity = (meta.get("vocab_type"), meta.get("n_vocab"), bos, eos, template)
        self.check_identity(identity, props.get("model_path"))
        self._use_vocab(self._vocab_file or _readable(props.get("model_path")), (bos, eos))
        body = {"content": eos, "add_special": False, "parse_special": True}
        eog = tuple(self.call("POST", "/tokenize", body)["tokens"]) if eos else ()
        return ModelInfo(
            id=self._id,
            path=self.url,
            context_size=context,
            chat_template=template,
            bos_token=bos,
            eos_token=eos,
            eog_token_ids=eog if len(eog) == 1 else (),
            n_vocab=int(meta.get("n_vocab") or 0),
        )

    def _use_vocab(self, path: Path | None, specials: Sequence[str]) -> None:
        """Tokenize here from the GGUF at ``path`` while the remote agrees with it."""
        if path != self._encoder_file:  # the remote serves another file of the same vocabulary
            if self._encoder is not None:
                self._encoder.close()  # its lock waits out an encode under way
            self._encoder_file = path
            self._encoder = None if path is None else LocalEncoder.from_gguf(path, specials)
        self.local_tokenizing = self._encoder is not None and self._encoder.agrees(
            self._remote_tokens
        )

    def tokenize(self, text: str, *, special: bool = True) -> list[int]:
        """Token ids of ``text`` (BOS if the model asks for it), blocking: made here while
        the local encoder agrees with the remote, else from its ``/tokenize``."""

        def fetch() -> list[int]:
            encoder = self._encoder if self.local_tokenizing else None
            if encoder is not None:
                try:
                    return encoder.encode(text, special=special)
                except EngineError:  # closed meanwhile: the remote was re-read
                    pass
            return self._remote_tokens(text, special)

        return self.cached_tokens(text, special, fetch)

    def _remote_tokens(self, text: str, special: bool = True) -> list[int]:
        """The remote's own ids of ``text``, BOS included (``/tokenize``, blocking)."""
        body = {"content": text, "add_special": True, "parse_special": special}
        return [int(t) for t in self.call("POST", "/tokenize", body)["tokens"]]

    def detokenize(self, tokens: list[int]) -> str:
        """Text of ``tokens``, control tokens rendered, from ``/detokenize`` (blocking)."""
        self.ensure_current()
        return str(self.call("POST", "/detokenize", {"tokens": list(tokens)})["content"])

    def generate(self, request: GenerateRequest) -> AsyncGenerator[EngineEvent, None]:
        """Stream PromptEvaluated, TokenGenerated*, GenerationFinished from the remote.

        Raises at once as the local engine does (empty prompt, no room, media); before
        the first event, EngineUnavailableError when the remote cannot be reached.
        """
        n_prompt = self.check_request(request)
        relay = CompletionRelay(self, n_prompt, open_on_progress=self.opens_before_first_token)
        return self.relay_stream("/completion", completion_body(request), relay)

    async def special_text(self, token: int) -> str:
        """The text of a control token, which llama-server streams as empty (cached)."""
        if token not in self._special:
            answer = await self.apost("/detokenize", {"tokens": [token]})
            self._special[token] = str(answer["content"])
        return self._special[token]

    async def retokenize(self, text: str) -> list[int]:
        """Token ids of generated ``text`` (no BOS), from ``/tokenize``."""
        body = {"content": text, "add_special": False, "parse_special": True}
        return [int(t) for t in (await self.apost("/tokenize", body))["tokens"]]

    async def close(self) -> None:
        """Close the HTTP clients and free the local vocabulary."""
        await super().close()
        if self._encoder is not None:
            self._encoder.close()

    def refusal(self, status: int, content: bytes) -> EngineError:
        """The error of a non-200 answer: unavailable (5xx, auth), overflow, or refused."""
        try:
            error = json.loads(content).get("error", {})
        except (ValueError, AttributeError):
            error = {}
        if isinstance(error, dict) and error.get("type") == "exceed_context_size_error":
            return ContextOverflowError(
                error_message(content),
                prompt_tokens=int(error.get("n_prompt_tokens", 0)),
                context_size=int(error.get("n_ctx", 0)),
            )
        if status in (401, 403):
            return EngineUnavailableError(
                f"llama-server at {self.url} refused the key ({status}): set {API_KEY_ENV} "
                "to its --api-key"
            )
        return super().refusal(status, content)


def _readable(model_path: object) -> Path | None:
    """The GGUF the remote names (``/props`` ``model_path``), when it is a file here too."""
    if not isinstance(model_path, str) or not model_path:
        return None
    path = Path(model_path)
    return path if path.is_file() else None

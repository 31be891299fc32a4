"""``VllmEngine``: a model a running vLLM serves, behind the Engine seam.

Superfluid renders, tokenizes (``local_encoder`` from ``tokenizer.json`` while its ids are
vLLM's, else vLLM's ``/tokenize``; cached per text) and parses; vLLM
generates (``/v1/completions``, ``vllm_completion``) and keeps its own prefix cache. The
HTTP side (clients, staleness, failures, the SSE loop) is ``client.RemoteEngine``'s.

vLLM does not serve its chat template, so the model's tokenizer files are given as a
local directory (spec ``ID=vllm:URL#tokenizer=PATH``): ``hf_tokenizer`` reads the
template, BOS and EOS from ``tokenizer_config.json`` and each id's bytes from
``tokenizer.json``, with the standard library (no ``transformers`` in the server). The
window is ``max_model_len`` from ``/v1/models``; the end-of-turn id is the EOS's
``/tokenize``; the vocabulary's size is ``tokenizer.json``'s. A remote restarted with
another model (another served name, window or EOS id) is refused under the old id.

Each request carries ``GenerateRequest.cache_salt``: vLLM never serves one salt's
cached blocks to another, so one principal's prefix-cache hits neither serve nor time
another's. Media are not supported through a remote.
"""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator
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
from jupyter_superfluid.engine.remote.hf_tokenizer import (
    TOKENIZER_FILE,
    TokenizerFiles,
    TokenizerFilesError,
    read_tokenizer,
)
from jupyter_superfluid.engine.remote.local_encoder import LocalEncoder
from jupyter_superfluid.engine.remote.vllm_completion import VllmRelay, completion_body

API_KEY_ENV = "VLLM_API_KEY"  # the remote's --api-key, when it has one


class VllmEngine(RemoteEngine):
    """A model that a running vLLM OpenAI server serves, reached over HTTP."""

    kind = "vLLM"

    def __init__(
        self,
        model_id: str,
        url: str,
        *,
        tokenizer: str | Path,
        api_key: str | None = None,
        **options: Any,
    ) -> None:
        key = api_key if api_key is not None else os.environ.get(API_KEY_ENV)
        super().__init__(model_id, url, api_key=key, **options)
        self._tokenizer_path = Path(tokenizer).expanduser()
        self._files: TokenizerFiles | None = None
        self._encoder: LocalEncoder | None = None
        self.local_tokenizing = False  # the encoder gave the remote's ids when last asked
        self.served = ""  # the remote's own model name, sent with every request

    @classmethod
    def connect(cls, model_id: str, url: str, **options: Any) -> VllmEngine:
        """An engine for the model vLLM serves at ``url`` (blocking: reads ``/v1/models``).

        Raises EngineError when the tokenizer files give no chat template, and
        EngineUnavailableError, naming the URL, when the remote cannot be reached.
        """
        engine = cls(model_id, url, **options)
        try:
            files = engine._files = read_tokenizer(engine._tokenizer_path)
        except TokenizerFilesError as err:
            engine._client.close()
            raise EngineError(
                f"model {model_id} (vLLM at {engine.url}) has no chat template: {err}; "
                "give its tokenizer files with #tokenizer=PATH"
            ) from err
        specials = (files.bos_token, files.eos_token)
        tokenizer_json = engine._tokenizer_path / TOKENIZER_FILE
        engine._encoder = LocalEncoder.from_tokenizer_json(tokenizer_json, specials)
        engine.open()
        return engine

    def read_model(self) -> ModelInfo:
        """ModelInfo from ``/v1/models`` and the tokenizer files; refuse another model."""
        assert self._files is not None
        try:
            served = self.call("GET", "/v1/models")["data"][0]
            name, context = str(served["id"]), int(served["max_model_len"])
        except (KeyError, IndexError, TypeError, ValueError) as err:
            raise EngineUnavailableError(
                f"{self.url} does not answer as vLLM does (no {err} in /v1/models)"
            ) from err
        files = self._files
        eos = files.eos_token
        body = {"model": name, "prompt": eos, "add_special_tokens": False}
        eog = tuple(self.call("POST", "/tokenize", body)["tokens"]) if eos else ()
        self.check_identity((name, context, eog, files.chat_template), served.get("root"))
        self.served = name
        self.local_tokenizing = self._encoder is not None and self._encoder.agrees(
            self._remote_tokens
        )
        return ModelInfo(
            id=self._id,
            path=self.url,
            context_size=context,
            chat_template=files.chat_template,
            bos_token=files.bos_token,
            eos_token=eos,
            eog_token_ids=eog if len(eog) == 1 else (),
            n_vocab=files.token_bytes.size if files.token_bytes else 0,
        )

    def tokenize(self, text: str, *, special: bool = True) -> list[int]:
        """Token ids of ``text`` (BOS if the model asks for it), blocking: made here while
        the local encoder agrees with vLLM, else from vLLM's ``/tokenize``.

        vLLM always parses control-token spellings: ``special=False`` tokenizes alike
        (so fill-in-the-middle is not offered through vLLM).
        """

        def fetch() -> list[int]:
            if self.local_tokenizing and self._encoder is not None:
                return self._encoder.encode(text)
            return self._remote_tokens(text)

        return self.cached_tokens(text, True, fetch)

    def _remote_tokens(self, text: str) -> list[int]:
        """vLLM's own ids of ``text`` (``/tokenize``, blocking)."""
        body = {"model": self.served, "prompt": text, "add_special_tokens": True}
        return [int(t) for t in self.call("POST", "/tokenize", body)["tokens"]]

    def detokenize(self, tokens: list[int]) -> str:
        """Text of ``tokens``, control tokens rendered (from the tokenizer's bytes, else vLLM)."""
        self.ensure_current()
        assert self._files is not None
        if self._files.token_bytes is not None:
            return self._files.token_bytes.decode(list(tokens))
        body = {"model": self.served, "tokens": list(tokens)}
        return str(self.call("POST", "/detokenize", body)["prompt"])

    def generate(self, request: GenerateRequest) -> AsyncGenerator[EngineEvent, None]:
        """Stream PromptEvaluated, TokenGenerated*, GenerationFinished from vLLM.

        Raises at once as the local engine does (empty prompt, no room, media); before
        the first event, EngineUnavailableError when the remote cannot be reached, and
        EngineError when vLLM refuses the request (a grammar it cannot compile: 400).
        """
        n_prompt = self.check_request(request)
        assert self._files is not None
        relay = VllmRelay(self.url, n_prompt, self._files.token_bytes, self.info.eog_token_ids)
        body = completion_body(request, self.served, self.info.context_size - n_prompt)
        return self.relay_stream("/v1/completions", body, relay)

    def refusal(self, status: int, content: bytes) -> EngineError:
        """The error of a non-200 answer: overflow, unavailable (5xx, auth), or refused."""
        message = error_message(content)
        if status == 400 and "maximum context length" in message:
            return ContextOverflowError(
                message, prompt_tokens=0, context_size=self.info.context_size
            )
        if status in (401, 403):
            return EngineUnavailableError(
                f"vLLM at {self.url} refused the key ({status}): set {API_KEY_ENV} to its --api-key"
            )
        return super().refusal(status, content)

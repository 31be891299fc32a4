"""llama.cpp's corpus of real chat templates, each carried by a tiny random model.

The templates come from the installed llama-cpp-python's source distribution
(``chat_templates()``: cached, downloaded with pip when missing), never from a committed
copy. Each gets a tiny model whose vocabulary holds its markers as control tokens and
whose end-of-generation tokens are its turn ends; a template whose own prompt does not
fit 4096 tokens gets a larger context. The models are served in batches, several per
standalone server (``--model ID=PATH``), started on first use.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jupyter_superfluid.chat.codec import ChatCodec
from jupyter_superfluid.chat.types import ChatMessage
from jupyter_superfluid.engine.remote.llama_sources import chat_templates
from jupyter_superfluid.pytest_plugin import StandaloneServer, start_standalone
from tools.template_corpus.report import TOOLS
from tools.template_corpus.tiny_models import build_template_model, template_vocab

BATCH = 8  # models per server: each runs in an engine process of its own
_MARGIN = 1536  # room for the tools, a continuation and the output, in tokens


@dataclass(frozen=True)
class CorpusModel:
    """One corpus template and the tiny model carrying it."""

    name: str
    source: str
    context: int
    codec: ChatCodec
    tokens: tuple[str, ...]  # the model's vocabulary, by token id


@functools.cache
def corpus() -> dict[str, CorpusModel]:
    """Every corpus template, by name (the file's stem)."""
    out = {}
    for path in chat_templates():
        source = path.read_text()
        codec, vocab = template_vocab(source)
        prompt = codec.render([ChatMessage("user", "Weather in Paris?")], tools=TOOLS)
        need = len(prompt.encode()) + _MARGIN
        context = 4096 if need <= 4096 else 4096 * -(-need // 4096)
        out[path.stem] = CorpusModel(path.stem, source, context, codec, tuple(vocab.tokens[0]))
    return out


def names() -> list[str]:
    """The templates in serving order (batches of one context size)."""
    return sorted(corpus(), key=lambda n: (corpus()[n].context, n.lower()))


class Servers:
    """Standalone servers for the corpus, a batch of models each, started on first use."""

    def __init__(self, cache: Path, workdir: Path) -> None:
        self._cache, self._workdir = cache, workdir
        self._batches: list[list[str]] = []
        for name in names():
            last = self._batches[-1] if self._batches else None
            same = last and corpus()[last[0]].context == corpus()[name].context
            if last is not None and same and len(last) < BATCH:
                last.append(name)
            else:
                self._batches.append([name])
        self._running: dict[int, tuple[StandaloneServer, Any]] = {}

    def client(self, name: str) -> Any:
        """The OpenAI client of the server that serves ``name`` (the model id)."""
        import openai

        index = next(i for i, b in enumerate(self._batches) if name in b)
        if index not in self._running:
            for other in list(self._running):  # one server at a time: 2 cores
                self._running.pop(other)[0].stop()
            self._running[index] = self._start(index)
            self._running[index] = (
                self._running[index][0],
                openai.OpenAI(
                    base_url=self._running[index][0].base_url,
                    api_key="unused",
                    max_retries=0,
                    timeout=180,
                ),
            )
        return self._running[index][1]

    def _start(self, index: int) -> tuple[StandaloneServer, Any]:
        batch = self._batches[index]
        specs = []
        for name in batch:
            model = corpus()[name]
            path = build_template_model(
                model.source, self._cache, name=name, context_length=model.context
            )
            specs.append(f"{name}={path}")
        server = start_standalone(
            self._cache,
            self._workdir,
            "--Superfluid.preload=False",
            "--model-wait=300",
            models=tuple(specs),
            context_size=corpus()[batch[0]].context,
        )
        return server, None

    def stop(self) -> None:
        """Stop every running server."""
        for server, _ in self._running.values():
            server.stop()
        self._running.clear()

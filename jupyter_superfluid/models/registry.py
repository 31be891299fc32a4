"""Which models this server offers, where their files come from, and lazy loading.

A model spec is one of:

- a path to a ``.gguf`` file (id: the file stem),
- ``hf:OWNER/REPO/FILE.gguf``, fetched into huggingface_hub's cache (id: the
  file stem; ``downloads.py``: resumable, with progress); a cached copy is used
  as is, without asking the hub for updates,
- a built-in test model id (``superfluid/tiny-chatml``, ``superfluid/tiny-qwen3``),
  generated deterministically into ``cache_dir`` on first use,
- ``llama-server:URL``, the model a running llama.cpp ``llama-server`` serves
  (``engine/remote/``; id: the URL without its scheme, e.g. ``gpu-box:8080``,
  known without contacting the remote),
- ``llama-server:URL,URL,…``, a pool of replicas of one model behind one id
  (``engine/remote/pool.py``: conversation affinity, least-loaded, failover; id: the
  first URL without its scheme),

each optionally prefixed ``ID=`` to choose the id. Engines load on first request,
one load at a time per model, through a *launcher* (``launch.py``): in a thread of
this process, or in an engine process of their own. Models can be added, unloaded
and removed at run time. When the hub is unreachable
(or ``HF_HUB_OFFLINE=1``) and nothing is cached, the answer is a quick
``ModelUnavailableError`` that names the offline choice, never a long hang:
a short TCP probe runs before huggingface_hub's own retrying requests.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import urlparse

from jupyter_superfluid.builtin_models.tiny_gguf import (
    BUILTIN_MODELS,
    ensure_builtin,
    ensure_builtin_projector,
)
from jupyter_superfluid.config import cache_root
from jupyter_superfluid.engine.base import Engine, EngineError
from jupyter_superfluid.engine.launch import Launcher, launch, launch_in_thread
from jupyter_superfluid.models.downloads import DownloadError, HubDownload
from jupyter_superfluid.models.hub_cache import HubFile, cached_file, hub_cache_dir

log = logging.getLogger(__name__)

OFFLINE_CHOICE = "superfluid/tiny-qwen3"
DEFAULT_MODELS: tuple[str, ...] = (
    "hf:unsloth/Qwen3-0.6B-GGUF/Qwen3-0.6B-Q4_K_M.gguf",
    "superfluid/tiny-qwen3",
    "superfluid/tiny-chatml",
)


class ModelNotFoundError(EngineError):
    """A model id this server does not offer."""


class ModelUnavailableError(EngineError):
    """A model offered but whose file cannot be obtained now (offline, not cached)."""


SpecKind = Literal["path", "hf", "builtin", "llama-server", "vllm"]
LLAMA_SERVER_PREFIX = "llama-server:"
VLLM_PREFIX = "vllm:"
REMOTE_KINDS = ("llama-server", "vllm")


@dataclass(frozen=True)
class ModelSpec:
    """One offered model: its id and where its file comes from."""

    id: str
    kind: SpecKind
    source: str  # a path, "OWNER/REPO/FILE.gguf", a built-in id, or a llama-server URL
    # (a pool of replicas: their URLs, comma-separated)
    spec: str  # as the user wrote it
    mmproj: str | None = None  # the projector for image/audio input: a path or hf:…
    # vllm: the model's tokenizer files (a local directory); llama-server: its GGUF, optional
    tokenizer: str | None = None

    @property
    def hf_repo_file(self) -> tuple[str, str]:
        """(repo id, file name in the repo) of an ``hf:`` spec."""
        owner, repo, filename = self.source.split("/", 2)
        return f"{owner}/{repo}", filename


def parse_spec(spec: str) -> ModelSpec:
    """Parse ``[ID=]PATH.gguf``, ``[ID=]hf:OWNER/REPO/FILE.gguf``, a built-in id or
    ``[ID=]llama-server:URL``.

    A model file may name its multimodal projector: ``…gguf;mmproj=PROJ.gguf``
    (a path or ``hf:OWNER/REPO/FILE.gguf``).
    """
    text, _, mmproj = spec.strip().partition(";mmproj=")
    parsed = _parse_model(text.strip(), spec)
    if not mmproj:
        return parsed
    if parsed.kind in ("builtin", *REMOTE_KINDS) or not mmproj.strip().endswith(".gguf"):
        raise ValueError(f"invalid model spec {spec!r}: mmproj= takes a .gguf path or hf: file")
    return dataclasses.replace(parsed, mmproj=mmproj.strip())


def _parse_model(text: str, spec: str) -> ModelSpec:
    """The model part of a spec."""
    given_id = None
    head, sep, rest = text.partition("=")
    plain = (
        head.startswith(("hf:", LLAMA_SERVER_PREFIX, VLLM_PREFIX))
        or any(c.isspace() for c in head)
        or Path(text).is_file()
    )
    if sep and head and not plain:
        given_id, text = head, rest
    if text.startswith(LLAMA_SERVER_PREFIX):
        # #tokenizer=PATH (optional): the served GGUF, readable here, to tokenize locally.
        urls, _, vocab = text[len(LLAMA_SERVER_PREFIX) :].partition("#tokenizer=")
        url = _remote_urls(urls, spec)
        # Without ID=: the (first) URL without its scheme, known without asking the remote.
        default_id = url.split(",", 1)[0].split("://", 1)[1]
        tokenizer = vocab.strip() or None
        return ModelSpec(given_id or default_id, "llama-server", url, spec, tokenizer=tokenizer)
    if text.startswith(VLLM_PREFIX):
        return _vllm_spec(text[len(VLLM_PREFIX) :], given_id, spec)
    if text in BUILTIN_MODELS:
        return ModelSpec(given_id or text, "builtin", text, spec)
    if text.startswith("hf:"):
        source = text[3:]
        if source.count("/") < 2 or not source.endswith(".gguf"):
            raise ValueError(f"invalid model spec {spec!r}: expected hf:OWNER/REPO/FILE.gguf")
        return ModelSpec(given_id or Path(source).stem, "hf", source, spec)
    if text.endswith(".gguf") or Path(text).is_file():
        path = Path(text).expanduser()
        return ModelSpec(given_id or path.stem, "path", str(path), spec)
    builtins = ", ".join(BUILTIN_MODELS)
    raise ValueError(
        f"invalid model spec {spec!r}: expected a .gguf path, hf:OWNER/REPO/FILE.gguf, "
        f"llama-server:URL or a built-in model ({builtins})"
    )


def _remote_url(url: str, spec: str) -> str:
    """A remote engine's base URL: http(s)://HOST[:PORT][/PATH], no trailing slash."""
    parsed = urlparse(url.strip())
    if parsed.scheme not in ("http", "https") or not parsed.hostname or parsed.query:
        raise ValueError(f"invalid model spec {spec!r}: expected llama-server:http://HOST:PORT")
    return url.strip().rstrip("/")


def _remote_urls(text: str, spec: str) -> str:
    """A remote engine's base URL, or a pool's replicas' (``URL,URL,…``), comma-joined."""
    urls = [_remote_url(part, spec) for part in text.split(",")]
    if len(set(urls)) < len(urls):
        raise ValueError(f"invalid model spec {spec!r}: a replica's URL is given twice")
    return ",".join(urls)


def _vllm_spec(text: str, given_id: str | None, spec: str) -> ModelSpec:
    """``vllm:URL#tokenizer=PATH``: vLLM serves no chat template, so its files are named."""
    url, _, tokenizer = text.partition("#tokenizer=")
    if not tokenizer.strip():
        raise ValueError(
            f"invalid model spec {spec!r}: expected vllm:URL#tokenizer=PATH (vLLM does not "
            "serve its chat template: PATH is the model's tokenizer files, a local directory)"
        )
    url = _remote_urls(url, spec)  # a pool of replicas: URL,URL,…
    source_id = given_id or url.split(",", 1)[0].split("://", 1)[1]
    return ModelSpec(source_id, "vllm", url, spec, tokenizer=tokenizer.strip())


def default_cache_dir() -> Path:
    """Where built-in models are generated when no directory is given: ``cache_root()/models``."""
    return cache_root() / "models"


def hub_files(spec: ModelSpec) -> list[HubFile]:
    """The hub files a model needs: its own (an ``hf:`` spec) and an ``hf:`` projector."""
    files = []
    if spec.kind == "hf":
        files.append(HubFile(*spec.hf_repo_file))
    if spec.mmproj is not None and spec.mmproj.startswith("hf:"):
        files.append(HubFile(*_parse_model(spec.mmproj, spec.spec).hf_repo_file))
    return files


def unavailable(spec: ModelSpec, reason: str) -> ModelUnavailableError:
    """The error of a model whose hub files cannot be had now, with the offline advice."""
    return ModelUnavailableError(
        f"model {spec.id} ({spec.spec.strip()}) is not in the local Hugging Face cache "
        f"({hub_cache_dir()}) and {reason}; to run offline, use a built-in model: "
        f"--model {OFFLINE_CHOICE}"
    )


def fetch_hf(spec: ModelSpec, file: HubFile) -> Path:
    """Local path of one of a model's hub files: from the cache, else downloaded."""
    path = cached_file(file)
    if path is not None:
        return path
    log.info("downloading %s from the Hugging Face hub", file.spec)
    try:
        (path,) = HubDownload([file]).run()
    except DownloadError as exc:
        raise unavailable(spec, str(exc)) from exc
    return path


class ModelRegistry:
    """Offered models by id; engines load lazily on first ``get``."""

    def __init__(
        self,
        specs: Iterable[str] | None = None,
        *,
        cache_dir: str | os.PathLike[str] | None = None,
        launcher: Launcher | None = None,
        remote_timeout: float | None = None,
        pool_routing: str = "affinity",
        **load_options: object,
    ) -> None:
        self.cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        self._specs: dict[str, ModelSpec] = {}
        self._aliases: dict[str, str] = {}
        for text in DEFAULT_MODELS if specs is None else specs:
            self.add(text)
        self._launcher: Launcher = launcher or launch_in_thread
        self._remote_timeout = remote_timeout  # seconds a remote engine's stream may be silent
        self._pool_routing = pool_routing  # how a pool of replicas routes (engine/remote/pool.py)
        self._load_options = load_options
        self._engines: dict[str, Engine] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._closed = False

    def ids(self) -> list[str]:
        """Offered model ids, in the order given."""
        return list(self._specs)

    def add(self, text: str) -> ModelSpec:
        """Offer one more model (``ValueError`` for a bad spec or an id offered already)."""
        spec = parse_spec(text)
        if spec.id in self._specs:
            raise ValueError(f"model id {spec.id!r} given twice")
        self._specs[spec.id] = spec
        self._aliases.setdefault(spec.spec.strip(), spec.id)
        return spec

    async def remove(self, model_id: str) -> ModelSpec:
        """Stop offering a model, closing its engine if it is loaded; its spec."""
        spec = self.spec(model_id)
        await self.unload(spec.id)
        del self._specs[spec.id]
        self._aliases = {text: i for text, i in self._aliases.items() if i != spec.id}
        return spec

    async def unload(self, model_id: str) -> bool:
        """Close the model's engine (its process exits), freeing its memory; whether one was."""
        spec = self.spec(model_id)
        async with self._locks.setdefault(spec.id, asyncio.Lock()):  # not while it loads
            engine = self._engines.pop(spec.id, None)
        if engine is None:
            return False
        await engine.close()
        log.info("unloaded model %s", spec.id)
        return True

    def spec(self, model_id: str) -> ModelSpec:
        """The spec of ``model_id`` (an id, or the spec text itself)."""
        key = model_id if model_id in self._specs else self._aliases.get(model_id)
        if key is None:
            offered = ", ".join(self._specs) or "none"
            raise ModelNotFoundError(f"model {model_id!r} not found (offered: {offered})")
        return self._specs[key]

    def loaded(self, model_id: str) -> Engine | None:
        """The engine of ``model_id`` if it is loaded already."""
        return self._engines.get(self.spec(model_id).id)

    def resolve(self, model_id: str) -> Path:
        """The model's local file, building or downloading it if needed (blocking)."""
        spec = self.spec(model_id)
        if spec.kind in REMOTE_KINDS:
            raise ModelUnavailableError(
                f"model {spec.id} is served by {spec.source}: no local file"
            )
        if spec.kind == "builtin":
            return ensure_builtin(spec.source, self.cache_dir)
        if spec.kind == "hf":
            return fetch_hf(spec, HubFile(*spec.hf_repo_file))
        return Path(spec.source)

    def resolve_projector(self, model_id: str) -> Path | None:
        """The model's multimodal projector file, if it has one (blocking)."""
        spec = self.spec(model_id)
        if spec.kind == "builtin":
            return ensure_builtin_projector(spec.source, self.cache_dir)
        if spec.mmproj is None:
            return None
        if spec.mmproj.startswith("hf:"):
            return fetch_hf(spec, HubFile(*_parse_model(spec.mmproj, spec.spec).hf_repo_file))
        return Path(spec.mmproj).expanduser()

    async def get(self, model_id: str) -> Engine:
        """The loaded engine of ``model_id``, launching it first if needed."""
        spec = self.spec(model_id)
        engine = self._engines.get(spec.id)
        if engine is not None:
            return engine
        async with self._locks.setdefault(spec.id, asyncio.Lock()):
            engine = self._engines.get(spec.id)
            if engine is None:
                engine = await self._load(spec)
                self._engines[spec.id] = engine
        return engine

    def load_options(self, model_id: str) -> dict[str, object]:
        """The options ``model_id`` launches with (files resolved: blocking)."""
        spec = self.spec(model_id)
        options = dict(self._load_options)
        mmproj = self.resolve_projector(spec.id)
        if mmproj is not None:
            options["mmproj"] = mmproj
        if spec.kind == "builtin" and options.get("threads") is None:
            # The tiny models decode fastest on one thread, and then they
            # never spin against other busy threads on a small machine.
            options["threads"] = 1
        return options

    async def _load(self, spec: ModelSpec) -> Engine:
        """Resolve ``spec``'s files (in a thread) and launch its engine."""
        if self._closed:
            raise EngineError("the model registry is closed")
        if spec.kind in REMOTE_KINDS:  # a remote engine: no file, no launcher
            return await asyncio.to_thread(self._connect, spec)
        path = await asyncio.to_thread(self.resolve, spec.id)
        options = await asyncio.to_thread(self.load_options, spec.id)
        log.info("loading model %s from %s", spec.id, path)
        engine = await launch(self._launcher, spec.id, path, **options)
        if self._closed:  # closed while loading: do not leak the engine
            await engine.close()
            raise EngineError("the model registry is closed")
        return engine

    def _connect(self, spec: ModelSpec) -> Engine:
        """An engine over the remote ``llama-server`` of ``spec`` (blocking: reads its props)."""
        from jupyter_superfluid.engine.remote.llama_server import LlamaServerEngine

        if "," in spec.source:  # a pool of replicas (of any remote kind)
            return self._connect_pool(spec)
        if spec.kind == "vllm":
            return self._connect_vllm(spec)
        timeout = self._remote_timeout
        options = {} if timeout is None else {"silence_timeout": timeout}
        return LlamaServerEngine.connect(spec.id, spec.source, tokenizer=spec.tokenizer, **options)

    def _connect_pool(self, spec: ModelSpec) -> Engine:
        """A pool over the replicas of ``spec``, each connected as a spec of its own (blocking)."""
        from jupyter_superfluid.engine.remote.pool import PoolEngine

        replicas = [
            (url, functools.partial(self._connect, dataclasses.replace(spec, source=url)))
            for url in spec.source.split(",")
        ]
        return PoolEngine.connect(spec.id, replicas, routing=self._pool_routing)

    def _connect_vllm(self, spec: ModelSpec) -> Engine:
        """An engine over the remote vLLM of ``spec`` (blocking: reads its models)."""
        from jupyter_superfluid.engine.remote.vllm import VllmEngine

        timeout = self._remote_timeout
        options = {} if timeout is None else {"silence_timeout": timeout}
        return VllmEngine.connect(spec.id, spec.source, tokenizer=spec.tokenizer, **options)

    async def close(self) -> None:
        """Close every loaded engine."""
        self._closed = True
        engines, self._engines = list(self._engines.values()), {}
        for engine in engines:
            await engine.close()

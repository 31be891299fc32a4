"""Every setting of jupyter_superfluid, as traitlets on one ``Superfluid`` configurable.

The server extension and the standalone server read the same section:
``c.Superfluid.models = [...]`` in ``jupyter_server_config.py`` (or
``jupyter_superfluid_config.py`` for the standalone server), and the
standalone server's CLI flags are aliases of these traits (``CLI_ALIASES``).
"""

from __future__ import annotations

import os
from pathlib import Path

from jupyter_core.paths import jupyter_data_dir
from traitlets import Bool, Enum, Float, Int, List, Unicode, default
from traitlets.config import LoggingConfigurable


def cache_root() -> Path:
    """Where built things are cached (``$SUPERFLUID_CACHE``, else ``~/.cache/jupyter_superfluid``).

    llama.cpp's sources, the ``llama-server`` build and the tests' built models live here.
    """
    if os.environ.get("SUPERFLUID_CACHE"):
        return Path(os.environ["SUPERFLUID_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "jupyter_superfluid"


def _data_dir(*parts: str) -> str:
    return str(Path(jupyter_data_dir(), "superfluid", *parts))


class Superfluid(LoggingConfigurable):
    """Settings shared by the Jupyter server extension and the standalone server."""

    models = List(
        Unicode(),
        help=(
            "Models to serve: a .gguf path, hf:REPO/FILE.gguf (downloaded into the "
            "Hugging Face cache), a built-in test model (superfluid/tiny-chatml, "
            "superfluid/tiny-qwen3), or llama-server:URL (the model a running llama.cpp "
            "llama-server serves; id: the URL without its scheme), each optionally "
            "prefixed ID= to choose its id. Empty: the default small Qwen3 model from "
            "the hub plus the built-in test models. Models added or removed at run time "
            "(/superfluid/v1/models) change this set, and the change is kept in the "
            "store across restarts."
        ),
    ).tag(config=True)

    sessions_dir = Unicode(
        help="Directory of the durable store (stored responses, sessions, tasks)."
    ).tag(config=True)

    @default("sessions_dir")
    def _default_sessions_dir(self) -> str:
        return os.environ.get("SUPERFLUID_SESSIONS_DIR") or _data_dir("sessions")

    model_cache_dir = Unicode(
        help="Directory where the built-in test models are generated on first use."
    ).tag(config=True)

    @default("model_cache_dir")
    def _default_model_cache_dir(self) -> str:
        return os.environ.get("SUPERFLUID_MODEL_CACHE") or _data_dir("models")

    context_size = Int(
        4096, help="Context window of one conversation, in tokens (llama.cpp n_ctx per sequence)."
    ).tag(config=True)

    threads = Int(
        0,
        help="CPU threads for generation; 0: the usable CPUs, at most 8. With few cores, one"
        " fewer leaves a core to the HTTP server (measured on 2 cores: docs/performance).",
    ).tag(config=True)

    gpu_layers = Int(
        0, help="Layers to offload to the GPU (llama.cpp n_gpu_layers; -1 for all)."
    ).tag(config=True)

    max_tokens = Int(
        0,
        help="Default cap on output tokens when a request sets none; 0 fills the context.",
    ).tag(config=True)

    cache_slots = Int(
        8,
        help="Conversations whose KV state is kept warm at once (llama.cpp sequences).",
    ).tag(config=True)

    kv_tokens = Int(
        0,
        help="KV cache budget in tokens. 0: each of the cache_slots conversations has a KV "
        "stream of one context_size window (cache_slots x context_size cells), and an idle "
        "one costs the running ones nothing; a number: one unified cache of that many cells "
        "all conversations share (less memory; idle ones are moved out of the running ones' way).",
    ).tag(config=True)

    cache_ram = Int(
        2048,
        help="Host memory (MiB) for idle conversations' KV state: parked out of the KV "
        "cache so they do not slow running generations, restored by a copy instead of "
        "re-evaluated. Only what can be continued (stored responses) and prefixes that "
        "recur are kept. 0 evicts instead.",
    ).tag(config=True)

    cache_disk = Int(
        4096,
        help="Disk space (MiB, per model) for kept conversations' KV state under "
        "<sessions_dir>/kv/, least recently used out: a conversation continued after a "
        "restart is restored from there instead of re-evaluated. 0 keeps nothing on disk.",
    ).tag(config=True)

    kv_write_delay = Float(
        2.0,
        help="Seconds the engine must have been idle before kept conversations' KV state "
        "is written to disk (write-behind: turns that follow each other pay no copy or "
        "write; closing writes what is pending). A kill -9 or a crash loses only the "
        "states not yet written, which are then evaluated again.",
    ).tag(config=True)

    remote_timeout = Float(
        300.0,
        help="Seconds a remote engine (llama-server:URL) may stay silent during a "
        "generation before it is taken as gone (the generation fails, engine_unavailable); "
        "its other calls (tokenizing, /props) wait at most 30 s, or this if shorter.",
    ).tag(config=True)

    pool_routing = Enum(
        ["affinity", "round-robin"],
        "affinity",
        help="How a pool of replicas (llama-server:URL,URL,...) routes generations: "
        "'affinity', a conversation's continuations to the replica that served it (its "
        "prefix is cached there) and new ones to the least-loaded replica; 'round-robin', "
        "each to the next replica, ignoring affinity (a benchmarking aid).",
    ).tag(config=True)

    model_wait = Float(
        5.0,
        help="Seconds a request waits for its model to finish downloading or loading "
        "before it is answered 503 model_loading with Retry-After and the progress "
        "(0: answer at once).",
    ).tag(config=True)

    preload = Bool(
        True, help="Start loading the first model when the server starts, not on first use."
    ).tag(config=True)

    engine_isolation = Enum(
        ["process", "thread"],
        "process",
        help="Where each loaded model's engine runs: 'process', a supervised engine process "
        "of its own (a llama.cpp crash ends only that process; it is restarted), or "
        "'thread', a thread of this server.",
    ).tag(config=True)

    engine_restart_wait = Float(
        30.0,
        help="Seconds a request waits for an engine process that is restarting after a "
        "crash before it is answered 503 engine_unavailable.",
    ).tag(config=True)

    engine_stall_timeout = Float(
        300.0,
        min=0.0,
        help="Seconds an engine process with generations in flight may make no progress "
        "(no step finished, or nothing heard: stopped, deadlocked) before it is killed and "
        "restarted (its generations fail, engine_crashed); also the longest a tokenizing "
        "call waits. It must exceed the longest single step (a prompt chunk of the largest "
        "model on the slowest machine). 0: never.",
    ).tag(config=True)

    engine_stream_interval = Float(
        0.008,
        min=0.0,
        help="Seconds an engine process may hold a generation's tokens after its first, to "
        "send them to the server together with the next steps' (its first token and its "
        "end go at once). Fewer, larger writes halve the server's CPU per token when one "
        "stream runs fast; 8 ms is under half a frame of a 60 Hz display. 0: every step's "
        "tokens as the step ends.",
    ).tag(config=True)

    api_keys = List(
        Unicode(),
        help="API keys accepted as 'Authorization: Bearer KEY' (all share one principal).",
    ).tag(config=True)

    key_policy = Unicode(
        "",
        help="A JSON key-policy file: several keys, each its own principal with scopes.",
    ).tag(config=True)

    host = Unicode("127.0.0.1", help="Standalone server: address to listen on.").tag(config=True)

    port = Int(8453, help="Standalone server: port to listen on.").tag(config=True)

    max_request_bytes = Int(16 * 1024 * 1024, help="Largest accepted request body, in bytes.").tag(
        config=True
    )

    task_event_retention = Float(3600.0, help="LMSP: seconds a task's events stay replayable.").tag(
        config=True
    )

    idempotency_ttl = Float(
        24 * 3600.0, help="LMSP: seconds an Idempotency-Key is remembered."
    ).tag(config=True)

    websocket_connections = Int(
        8,
        help="WebSocket mode of /v1/responses: open connections allowed per API key (per "
        "principal); one more is refused with 429 before the upgrade. 0: no limit.",
    ).tag(config=True)

    websocket_messages_per_second = Float(
        20.0,
        help="WebSocket mode of /v1/responses: messages a connection may send per second "
        "(over one-second windows); past it a message gets a rate_limit_exceeded error "
        "event and is dropped. 0: no limit.",
    ).tag(config=True)


CLI_ALIASES: dict[str, str] = {
    "model": "Superfluid.models",
    "sessions-dir": "Superfluid.sessions_dir",
    "model-cache-dir": "Superfluid.model_cache_dir",
    "ctx-size": "Superfluid.context_size",
    "threads": "Superfluid.threads",
    "gpu-layers": "Superfluid.gpu_layers",
    "max-tokens": "Superfluid.max_tokens",
    "cache-slots": "Superfluid.cache_slots",
    "kv-tokens": "Superfluid.kv_tokens",
    "cache-ram": "Superfluid.cache_ram",
    "engine-isolation": "Superfluid.engine_isolation",
    "engine-restart-wait": "Superfluid.engine_restart_wait",
    "engine-stall-timeout": "Superfluid.engine_stall_timeout",
    "engine-stream-interval": "Superfluid.engine_stream_interval",
    "remote-timeout": "Superfluid.remote_timeout",
    "pool-routing": "Superfluid.pool_routing",
    "model-wait": "Superfluid.model_wait",
    "cache-disk": "Superfluid.cache_disk",
    "kv-write-delay": "Superfluid.kv_write_delay",
    "api-key": "Superfluid.api_keys",
    "key-policy": "Superfluid.key_policy",
    "host": "Superfluid.host",
    "port": "Superfluid.port",
    "ws-connections": "Superfluid.websocket_connections",
    "ws-messages-per-second": "Superfluid.websocket_messages_per_second",
}

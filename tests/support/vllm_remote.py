"""The vLLM tests' remote: the cached vLLM venv, its tiny model, and a server one can restart.

The venv is ``ensure_vllm``'s (``jupyter superfluid build-vllm``); the model is tiny-qwen3's
vocabulary and template as a random 3M-parameter Llama in Hugging Face format, built by
``vllm_model.py`` with the venv's python into ``<cache_root>/vllm-models/`` (a hash of
its inputs in the name, so a changed builder never reuses a stale model).
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import psutil

from jupyter_superfluid.builtin_models.templates import QWEN3, SPECIAL_TOKENS
from jupyter_superfluid.config import cache_root
from jupyter_superfluid.engine.remote.vllm_build import vllm_environment

BUILDER = Path(__file__).with_name("vllm_model.py")
MODEL_SPEC = {"chat_template": QWEN3, "special_tokens": list(SPECIAL_TOKENS)}
MODEL_SPEC["eos_token"] = "<|im_end|>"
SERVED = "tiny-qwen3"
MAX_MODEL_LEN = 4096
BLOCK = 32  # vLLM's CPU block size must be a multiple of 32; cached_tokens counts blocks
START_TIMEOUT_S = 600


def vllm_model_dir(cache: Path | None = None) -> Path:
    """Where the tiny vLLM model is cached (named by a hash of its inputs)."""
    blob = BUILDER.read_bytes() + json.dumps(MODEL_SPEC, sort_keys=True).encode()
    return (
        (cache or cache_root())
        / "vllm-models"
        / f"tiny-qwen3-{hashlib.sha256(blob).hexdigest()[:12]}"
    )


def ensure_vllm_model(python: Path, cache: Path | None = None) -> Path:
    """The tiny model's directory, built first with the vLLM venv's ``python`` (~20 s)."""
    target = vllm_model_dir(cache)
    if (target / "model.safetensors").is_file():
        return target
    partial = target.with_name(target.name + ".partial")
    partial.mkdir(parents=True, exist_ok=True)
    spec = partial / "spec.json"
    spec.write_text(json.dumps(MODEL_SPEC))
    subprocess.run([str(python), str(BUILDER), str(partial), str(spec)], check=True)
    spec.unlink()
    os.replace(partial, target)
    return target


@dataclass
class VllmServer:
    """A vLLM OpenAI server subprocess on the tiny model; stop and start it again at will."""

    python: Path
    model: Path
    port: int
    log_path: Path
    process: subprocess.Popen[bytes] | None = None
    env: dict[str, str] | None = None  # more environment (e.g. VLLM_CPU_OMP_THREADS_BIND)
    log_requests: bool = False  # its log names each request, and each abort

    @property
    def url(self) -> str:
        """Its base URL."""
        return f"http://127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        """The server's command line: the flags superfluid needs of a vLLM."""
        outputs = json.dumps({"backend": "xgrammar", "disable_any_whitespace": True})
        # float32, not the weights' bfloat16: with bfloat16 on a CPU that lists AMX, vLLM's
        # attention takes its AMX kernels, and where the VM does not grant the AMX state
        # (seen here) its worker dies of SIGILL at the first request.
        return [
            *(str(self.python), "-m", "vllm.entrypoints.openai.api_server"),
            *("--model", str(self.model), "--served-model-name", SERVED),
            *("--host", "127.0.0.1", "--port", str(self.port)),
            *("--enforce-eager", "--dtype", "float32", "--max-model-len", str(MAX_MODEL_LEN)),
            *("--block-size", str(BLOCK), "--enable-prefix-caching"),
            *("--enable-prompt-tokens-details", "--structured-outputs-config", outputs),
            *(("--enable-log-requests",) if self.log_requests else ()),
        ]

    def start(self) -> VllmServer:
        """Start it on its port and wait until it serves (tens of seconds)."""
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                self.command(),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                # Unbuffered: its log says what it did when it did (tests wait on lines).
                env={**vllm_environment(), "PYTHONUNBUFFERED": "1", **(self.env or {})},
                start_new_session=True,  # its engine-core child is stopped with it
            )
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"vLLM exited:\n{self.log_path.read_text()[-3000:]}")
            try:
                if httpx.get(self.url + "/health", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        raise RuntimeError(f"vLLM did not start:\n{self.log_path.read_text()[-3000:]}")

    def stop(self, sig: int = signal.SIGTERM) -> None:
        """Stop it and its children (``sig`` to its process group; SIGKILL if it lingers)."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, sig)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self.process = None

    @contextmanager
    def engine_paused(self) -> Iterator[None]:
        """Its engine core stopped (SIGSTOP) for the block: nothing generates, while its API
        server goes on answering, and taking requests and aborts for the engine."""
        assert self.process is not None
        children = psutil.Process(self.process.pid).children(recursive=True)
        core = next(p for p in children if "EngineCore" in p.name())
        core.suspend()
        try:
            yield
        finally:
            core.resume()

    def log_size(self) -> int:
        """Where its log ends now (for ``wait_logged``)."""
        return self.log_path.stat().st_size

    def wait_logged(self, text: str, since: int, timeout: float = 60) -> bool:
        """Whether its log says ``text`` after offset ``since`` within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.log_path.open("rb") as log:
                log.seek(since)
                if text.encode() in log.read():
                    return True
            time.sleep(0.05)
        return False

    def metrics(self) -> dict[str, float]:
        """Its Prometheus gauges and counters, summed over labels (``vllm:`` dropped)."""
        text = httpx.get(self.url + "/metrics", timeout=10).text
        out: dict[str, float] = {}
        for line in text.splitlines():
            if line.startswith("vllm:"):
                name, value = line.rsplit(" ", 1)
                key = name.split("{", 1)[0].removeprefix("vllm:")
                out[key] = out.get(key, 0.0) + float(value)
        return out

    def wait_idle(self, timeout: float = 60) -> dict[str, float]:
        """Its counters once no request is running or waiting (fails past ``timeout``)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            counters = self.metrics()
            if (
                counters.get("num_requests_running", 0) + counters.get("num_requests_waiting", 0)
                == 0
            ):
                return counters
            time.sleep(0.05)
        raise AssertionError("vLLM kept running requests")

"""Pytest fixtures for testing against jupyter_superfluid (prefix ``sf_``).

Shipped with the package so that extensions and notebooks built on superfluid can
test against a real server with the tiny built-in models. It is loaded where asked:
``pytest_plugins = ["jupyter_superfluid.pytest_plugin"]`` in a conftest, or
``-p jupyter_superfluid.pytest_plugin``.

- ``sf_model_cache``: a session-wide directory holding the built tiny models.
- ``sf_jupyter_config``: a pytest-jupyter ``jp_server_config`` enabling the
  extension on the tiny models (use it in your ``jp_server_config`` override).
- ``sf_start_standalone``: a factory starting ``python -m jupyter_superfluid
  serve`` in a subprocess; returns a ``StandaloneServer`` (url, process).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

TINY_MODELS = ("superfluid/tiny-chatml", "superfluid/tiny-qwen3")


def free_port() -> int:
    """An unused TCP port on loopback."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class StandaloneServer:
    """A standalone server subprocess and where it listens."""

    url: str  # http://127.0.0.1:PORT
    process: subprocess.Popen[bytes]
    sessions_dir: Path
    log_path: Path

    @property
    def base_url(self) -> str:
        """The OpenAI base URL (``…/v1``)."""
        return self.url + "/v1"

    def log(self) -> str:
        """What the server printed so far."""
        return self.log_path.read_text(errors="replace")

    def stop(self, sig: int | None = None) -> int:
        """Stop it (SIGTERM by default, or ``sig``) and return its exit code."""
        if self.process.poll() is None:
            if sig is None:
                self.process.terminate()
            else:
                self.process.send_signal(sig)
        try:
            return self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()


@pytest.fixture(scope="session")
def sf_model_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory with the built-in tiny models, built once per test session."""
    from jupyter_superfluid.builtin_models.tiny_gguf import ensure_builtin

    cache = Path(
        os.environ.get("SUPERFLUID_TEST_MODEL_CACHE") or tmp_path_factory.mktemp("sf-models")
    )
    for model_id in TINY_MODELS:
        ensure_builtin(model_id, cache)
    return cache


@pytest.fixture
def sf_sessions_dir(tmp_path: Path) -> Path:
    """A fresh store directory for one test."""
    path = tmp_path / "sf-sessions"
    path.mkdir()
    return path


@pytest.fixture
def sf_jupyter_config(sf_model_cache: Path, sf_sessions_dir: Path) -> dict[str, Any]:
    """Server config enabling the extension on the tiny models."""
    return {
        "ServerApp": {"jpserver_extensions": {"jupyter_superfluid": True}},
        "Superfluid": {
            "models": list(TINY_MODELS),
            "model_cache_dir": str(sf_model_cache),
            "sessions_dir": str(sf_sessions_dir),
            "context_size": 2048,
            "preload": False,
        },
    }


def wait_ready(
    url: str, process: subprocess.Popen[bytes], log_path: Path, timeout: float = 60
) -> None:
    """Poll ``url/v1/models`` until it answers; fail with the server's log if it dies."""
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited {process.returncode}:\n{log_path.read_text()}")
        try:
            httpx.get(url + "/v1/models", timeout=2, headers={"Authorization": "Bearer probe"})
            return
        except httpx.HTTPError:
            time.sleep(0.1)
    raise RuntimeError(f"server did not start in {timeout}s:\n{log_path.read_text()}")


def start_standalone(
    model_cache: Path,
    workdir: Path,
    *args: str,
    sessions_dir: Path | None = None,
    models: tuple[str, ...] = TINY_MODELS,
    context_size: int = 2048,
) -> StandaloneServer:
    """Start ``python -m jupyter_superfluid serve`` on a free port and wait for it."""
    port = free_port()
    workdir.mkdir(parents=True, exist_ok=True)
    store = sessions_dir or workdir / f"sessions-{port}"
    log_path = workdir / f"server-{port}.log"
    cmd = [
        sys.executable,
        "-m",
        "jupyter_superfluid",
        "serve",
        f"--port={port}",
        f"--sessions-dir={store}",
        f"--model-cache-dir={model_cache}",
        f"--ctx-size={context_size}",
        *(f"--model={m}" for m in models),
        *args,
    ]
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    server = StandaloneServer(f"http://127.0.0.1:{port}", proc, store, log_path)
    try:
        wait_ready(server.url, proc, log_path)
    except RuntimeError:
        server.stop()
        raise
    return server


@pytest.fixture
def sf_start_standalone(
    sf_model_cache: Path, tmp_path: Path
) -> Iterator[Callable[..., StandaloneServer]]:
    """Factory: start a standalone server subprocess with extra CLI args."""
    started: list[StandaloneServer] = []

    def start(*args: str, **kwargs: Any) -> StandaloneServer:
        server = start_standalone(sf_model_cache, tmp_path / "standalone", *args, **kwargs)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()

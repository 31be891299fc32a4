"""Fixtures of the remote-engine tests: real ``llama-server`` processes on the tiny models.

The binary is the package's own build (``ensure_llama_server``: cached under
``~/.cache/jupyter_superfluid``, built there first when missing, ~10 minutes on 2
cores). Each remote runs with an API key, so every test also crosses llama-server's
auth; superfluid gets the key through ``LLAMA_API_KEY``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support.slow_model import slow_model

from jupyter_superfluid.builtin_models.tiny_gguf import ensure_builtin
from jupyter_superfluid.engine.remote.build import ensure_llama_server
from jupyter_superfluid.pytest_plugin import StandaloneServer, free_port, start_standalone

from .helpers import REMOTE_KEY, SLOTS, RemoteServer


@pytest.fixture(scope="session")
def llama_server_binary() -> Path:
    """The package's llama-server build (built now if it is not cached)."""
    return ensure_llama_server()


@pytest.fixture(scope="session")
def start_remote(
    llama_server_binary: Path, sf_model_cache: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[..., RemoteServer]]:
    """Factory: a started llama-server on a built-in model id or a GGUF path; all stopped after."""
    logs = tmp_path_factory.mktemp("llama-server")
    started: list[RemoteServer] = []

    def start(model: str | Path, slots: int = SLOTS) -> RemoteServer:
        path = Path(model) if isinstance(model, Path) else ensure_builtin(model, sf_model_cache)
        port = free_port()
        log = logs / f"llama-server-{port}.log"
        remote = RemoteServer(llama_server_binary, path, port, log, slots=slots)
        started.append(remote.start())
        return remote

    yield start
    for remote in started:
        remote.stop()


@pytest.fixture(scope="session")
def remote_chatml(start_remote: Callable[..., RemoteServer]) -> RemoteServer:
    """The shared remote serving tiny-chatml."""
    return start_remote("superfluid/tiny-chatml")


@pytest.fixture(scope="session")
def remote_qwen(start_remote: Callable[..., RemoteServer]) -> RemoteServer:
    """The shared remote serving tiny-qwen3."""
    return start_remote("superfluid/tiny-qwen3")


@pytest.fixture(scope="session")
def remote_slow(start_remote: Callable[..., RemoteServer], sf_model_cache: Path) -> RemoteServer:
    """The shared remote serving a model slow enough to be interrupted (one slot)."""
    return start_remote(slow_model(sf_model_cache), slots=1)


def start_over_remotes(
    model_cache: Path, workdir: Path, remotes: dict[str, RemoteServer], *args: str
) -> StandaloneServer:
    """A standalone superfluid serving ``{id: remote}`` as ``ID=llama-server:URL`` models."""
    models = tuple(f"{model_id}=llama-server:{r.url}" for model_id, r in remotes.items())
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LLAMA_API_KEY", REMOTE_KEY)  # read by the server process it starts
        return start_standalone(model_cache, workdir, *args, models=models)


@pytest.fixture(scope="session")
def over_remotes(
    sf_model_cache: Path,
    tmp_path_factory: pytest.TempPathFactory,
    remote_chatml: RemoteServer,
    remote_qwen: RemoteServer,
    remote_slow: RemoteServer,
) -> Iterator[StandaloneServer]:
    """One standalone superfluid serving the shared remotes as ``chatml``, ``qwen``, ``slow``."""
    remotes = {"chatml": remote_chatml, "qwen": remote_qwen, "slow": remote_slow}
    server = start_over_remotes(sf_model_cache, tmp_path_factory.mktemp("over-remotes"), remotes)
    yield server
    server.stop()

"""Shared fixtures: one standalone server per test session, and Jupyter config."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# The plugin and the helpers are imported here before pytest registers them: rewrite
# their asserts all the same.
pytest.register_assert_rewrite("jupyter_superfluid.pytest_plugin", "support")

from support.local_hub import LocalHub  # noqa: E402

from jupyter_superfluid.builtin_models.tiny_gguf import BUILTIN_MODELS, ensure_builtin  # noqa: E402
from jupyter_superfluid.pytest_plugin import StandaloneServer, start_standalone  # noqa: E402

# The package's fixtures plugin is loaded where asked (here), not by an entry point into
# every pytest run wherever the package is installed.
pytest_plugins = [
    "pytest_jupyter.jupyter_server",
    "jupyter_superfluid.pytest_plugin",
    "support.prerequisites",  # llama-server and Chromium, made ready before the first test
]


@pytest.fixture
def jp_server_config(sf_jupyter_config: dict[str, Any]) -> dict[str, Any]:
    """Every Jupyter server in these tests runs the extension on the tiny models."""
    return sf_jupyter_config


@pytest.fixture(scope="session")
def standalone(
    sf_model_cache: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[StandaloneServer]:
    """One standalone server (no keys) shared by the tests that only read and create."""
    server = start_standalone(sf_model_cache, tmp_path_factory.mktemp("standalone"))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def openai_client(standalone: StandaloneServer) -> Any:
    """The official sync OpenAI client against the shared standalone server."""
    import openai

    return openai.OpenAI(base_url=standalone.base_url, api_key="unused", max_retries=0, timeout=120)


@pytest.fixture
def local_hub() -> Iterator[LocalHub]:
    """A Hugging Face hub on loopback (``tests/support/local_hub.py``), stopped after the test."""
    hub = LocalHub().start()
    yield hub
    hub.release()
    hub.stop()


@pytest.fixture
def hub_env(local_hub: LocalHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``HF_ENDPOINT`` at the local hub and an empty Hugging Face home; that home."""
    home = tmp_path / "hf-home"
    monkeypatch.setenv("HF_ENDPOINT", local_hub.url)
    monkeypatch.setenv("HF_HOME", str(home))
    for name in ("HF_HUB_CACHE", "HF_HUB_OFFLINE", "HF_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    return home


@pytest.fixture(scope="session")
def sf_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The built-in models, built once per test session."""
    cache = tmp_path_factory.mktemp("models")
    return {model_id: ensure_builtin(model_id, cache) for model_id in BUILTIN_MODELS}

"""Shared fixtures: one standalone server per test session, and Jupyter config."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jupyter_superfluid.pytest_plugin import StandaloneServer, start_standalone
from tests.local_hub import LocalHub

pytest_plugins = ["pytest_jupyter.jupyter_server"]


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
    """A Hugging Face hub on loopback (see ``tests/local_hub.py``), stopped after the test."""
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

"""Fixtures of the LMSP tests: the shared standalone server, and one for long generations."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from jupyter_superfluid.pytest_plugin import StandaloneServer, start_standalone


@pytest.fixture(scope="session")
def url(standalone: StandaloneServer) -> str:
    """The LMSP base URL of the shared standalone server."""
    return standalone.url + "/lmsp/v1"


@pytest.fixture(scope="session")
def busy(
    sf_model_cache: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[StandaloneServer]:
    """A server of its own for long generations (cancel, disconnect, in progress).

    Its own engine counters tell whether a generation stopped; a large context
    lets a generation run for seconds, long enough to act on it mid-way.
    """
    server = start_standalone(sf_model_cache, tmp_path_factory.mktemp("busy"), context_size=4096)
    yield server
    server.stop()


POLICY = {
    "keys": [
        {"name": "full", "key": "sk-full"},
        {"name": "reader", "key": "sk-reader", "scopes": ["models:read", "responses:read"]},
        {"name": "writer", "key": "sk-writer", "scopes": ["responses:write"]},
        {"name": "tasker", "key": "sk-tasker", "scopes": ["tasks:read", "tasks:write"]},
    ]
}


@pytest.fixture(scope="session")
def keyed(sf_model_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The LMSP base URL of a server with a key policy: four keys, four principals."""
    work = tmp_path_factory.mktemp("keyed")
    policy = work / "keys.json"
    policy.write_text(json.dumps(POLICY))
    server = start_standalone(
        sf_model_cache,
        work,
        f"--key-policy={policy}",
        "--Superfluid.max_request_bytes=4096",
        "--Superfluid.preload=False",
    )
    yield server.url + "/lmsp/v1"
    server.stop()

"""Fixtures of the vLLM tests: one real vLLM server (CPU) per session, on a tiny model.

The venv and the model are made ready before the first test by
``tests/support/prerequisites.py`` (cached under ``~/.cache/jupyter_superfluid``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.vllm_remote import VllmServer, ensure_vllm_model

from jupyter_superfluid.engine.remote.vllm_build import vllm_python
from jupyter_superfluid.pytest_plugin import StandaloneServer, free_port, start_standalone

KEYS = {"alice": "sk-alice-vllm", "bob": "sk-bob-vllm"}


@pytest.fixture(scope="session")
def vllm_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VllmServer]:
    """The session's vLLM server on the tiny model (started once: tens of seconds)."""
    python = vllm_python()
    log = tmp_path_factory.mktemp("vllm") / "vllm.log"
    server = VllmServer(python, ensure_vllm_model(python), free_port(), log, log_requests=True)
    server.start()
    yield server
    server.stop()


def over_vllm(model_cache: Path, workdir: Path, remote: VllmServer, *args: str) -> StandaloneServer:
    """A standalone superfluid serving ``remote`` as ``q=vllm:URL#tokenizer=PATH``."""
    model = f"q=vllm:{remote.url}#tokenizer={remote.model}"
    return start_standalone(model_cache, workdir, *args, models=(model,))


@pytest.fixture(scope="session")
def superfluid_vllm(
    sf_model_cache: Path, tmp_path_factory: pytest.TempPathFactory, vllm_server: VllmServer
) -> Iterator[StandaloneServer]:
    """One standalone superfluid over the session's vLLM, with two keys of a key policy."""
    workdir = tmp_path_factory.mktemp("over-vllm")
    policy = workdir / "keys.json"
    policy.write_text(json.dumps({"keys": [{"name": n, "key": k} for n, k in KEYS.items()]}))
    server = over_vllm(sf_model_cache, workdir, vllm_server, f"--key-policy={policy}")
    yield server
    server.stop()

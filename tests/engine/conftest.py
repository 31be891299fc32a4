"""Fixtures for the engine tests: tiny built-in models and real llama.cpp engines."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from jupyter_superfluid.engine.local.llama import LlamaEngine
from jupyter_superfluid.engine.testmodels import (
    BUILTIN_MODELS,
    ensure_builtin,
    ensure_builtin_projector,
)


@pytest.fixture(scope="session")
def sf_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The built-in models, built once per test session."""
    cache = tmp_path_factory.mktemp("models")
    return {model_id: ensure_builtin(model_id, cache) for model_id in BUILTIN_MODELS}


@pytest.fixture(scope="session")
def sf_engine(sf_models: dict[str, Path]) -> Iterator[LlamaEngine]:
    """One shared engine on tiny-chatml (tests using it read counter deltas only)."""
    engine = LlamaEngine.load(
        "superfluid/tiny-chatml", sf_models["superfluid/tiny-chatml"], threads=1
    )
    yield engine
    engine.close_sync()


@pytest.fixture
def sf_make_engine(sf_models: dict[str, Path]) -> Iterator[Callable[..., LlamaEngine]]:
    """Load fresh engines (a clean prefix cache); all closed after the test."""
    engines: list[LlamaEngine] = []

    def make(model_id: str = "superfluid/tiny-chatml", **options: object) -> LlamaEngine:
        options.setdefault("threads", 1)
        path = sf_models[model_id]
        options.setdefault("mmproj", ensure_builtin_projector(model_id, path.parent))
        engine = LlamaEngine.load(model_id, sf_models[model_id], **options)  # type: ignore[arg-type]
        engines.append(engine)
        return engine

    yield make
    for engine in engines:
        engine.close_sync()

"""Fixtures for the engine tests: tiny built-in models and real llama.cpp engines."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from jupyter_superfluid.builtin_models.tiny_gguf import ensure_builtin_projector
from jupyter_superfluid.engine.local.llama import LlamaEngine


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

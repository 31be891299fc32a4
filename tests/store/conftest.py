"""Fixtures for the store tests: a real store in a temporary directory."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from jupyter_superfluid.store import Store

from .helpers import Clock


@pytest.fixture
def clock() -> Clock:
    """A hand-moved clock."""
    return Clock()


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """The store's root directory."""
    return tmp_path / "sessions"


@pytest.fixture
def store(root: Path, clock: Clock) -> Iterator[Store]:
    """A store on real SQLite files, closed after the test."""
    s = Store(root, clock=clock)
    yield s
    s.close()

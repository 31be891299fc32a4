"""Fixtures of the corpus tests: the servers of the corpus models, and the table."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.corpus.corpus_models import Servers, corpus
from tools.template_corpus.report import report, table


@pytest.fixture(scope="session")
def corpus_servers(
    sf_model_cache: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Servers]:
    """The corpus servers (see ``Servers``)."""
    servers = Servers(sf_model_cache / "corpus", tmp_path_factory.mktemp("corpus"))
    yield servers
    servers.stop()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Print the corpus table when corpus tests ran."""
    if not terminalreporter.stats.get("passed") and not terminalreporter.stats.get("failed"):
        return
    if not any("tests/corpus" in str(r.nodeid) for r in terminalreporter.stats.get("passed", [])):
        return
    rows = [report(n, corpus()[n].codec) for n in sorted(corpus(), key=str.lower)]
    terminalreporter.write_sep("=", "llama.cpp's chat templates")
    terminalreporter.write_line(table(rows))

"""A bare IPython shell with ``%load_ext jupyter_superfluid``, pointed at the standalone server."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from IPython.core.interactiveshell import InteractiveShell
from traitlets.config import Config

from jupyter_superfluid.notebook import client as discovery
from jupyter_superfluid.notebook.respond import NotebookSession


@pytest.fixture(scope="session")
def ipython() -> InteractiveShell:
    """One bare shell for the whole run (IPython keeps a singleton), history in memory."""
    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    shell = InteractiveShell.instance(config=config)
    shell.run_line_magic("load_ext", "jupyter_superfluid")
    return shell


@pytest.fixture
def shell(
    ipython: InteractiveShell, standalone: Any, monkeypatch: pytest.MonkeyPatch
) -> Iterator[InteractiveShell]:
    """The shell with a fresh ``%%respond`` state, talking to the standalone server."""
    monkeypatch.setenv(discovery.ENV_BASE_URL, standalone.base_url)
    monkeypatch.delenv(discovery.ENV_API_KEY, raising=False)
    monkeypatch.delenv(discovery.ENV_MODEL, raising=False)
    magics = ipython.magics_manager.registry["RespondMagics"]
    magics.session = NotebookSession()
    saved = dict(ipython.user_ns)
    yield ipython
    ipython.user_ns.clear()
    ipython.user_ns.update(saved)

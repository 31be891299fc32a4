"""The Binder configuration (``binder/``), built and run as repo2docker would, in a fresh venv.

repo2docker clones the repository, installs ``binder/requirements.txt`` from its root
(with ``apt.txt``'s compiler and the base image's node), runs ``binder/postBuild``, and
starts the server through ``binder/start``. This test does the same here:

- the repository's files as a clone has them (git's tracked and unignored files) are
  copied aside, so that the in-tree build writes nothing into this checkout;
- a fresh virtual environment (no system site-packages) installs
  ``binder/requirements.txt`` from the copy, building "." for real, front-end included.
  To stay within minutes, llama-cpp-python is pinned to the version installed here,
  whose wheel pip built once and keeps in its wheel cache, and an installed
  ``labextension/node_modules`` is copied along (npm still runs its install and the
  whole build);
- ``binder/postBuild`` runs with ``SUPERFLUID_SKIP_MODEL_DOWNLOAD=1`` (and first without
  it, offline, where the failed download falls back to the tiny models too);
- ``binder/start`` launches JupyterLab from the venv under a JupyterHub-like base URL,
  with every Jupyter directory private to the test, and ``01-quickstart`` runs in a
  kernel that this server started.

Deselect with ``-m "not binder"``.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

import httpx
import pytest
from demos.runner import execute, problems, read_notebook, stdout

from jupyter_superfluid.pytest_plugin import free_port

pytestmark = [pytest.mark.binder, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
TINY = ["superfluid/tiny-qwen3", "superfluid/tiny-chatml"]
BASE = "/user/ada/"  # a JupyterHub-like base URL, as on Binder
TOKEN = "binder-test-token"


@dataclass
class BinderEnv:
    """The copied repository, its fresh venv, and what postBuild printed."""

    repo: Path
    venv: Path
    dirs: Path  # private Jupyter and Hugging Face directories
    offline_log: str
    skipped_log: str

    @property
    def config(self) -> dict:
        """The environment's jupyter_server_config.json, as postBuild left it."""
        return json.loads((self.venv / "etc/jupyter/jupyter_server_config.json").read_text())


def run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float = 600) -> str:
    """Run a command; its output, or a failure that shows it."""
    done = subprocess.run(
        cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"{' '.join(cmd)} exited {done.returncode}:\n{output[-6000:]}"
    return output


def venv_env(venv: Path, dirs: Path, **extra: str) -> dict[str, str]:
    """This machine's environment, but with the venv first and private Jupyter dirs."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SUPERFLUID_", "JUPYTER", "PYTHON", "VIRTUAL_ENV", "HF_"))
    }
    env.update(
        PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}",
        JUPYTER_CONFIG_DIR=str(dirs / "config"),
        JUPYTER_DATA_DIR=str(dirs / "data"),
        JUPYTER_RUNTIME_DIR=str(dirs / "runtime"),
        HF_HOME=str(dirs / "hf"),
        **extra,
    )
    return env


def copy_checkout(dest: Path) -> None:
    """The files a clone would have (tracked and unignored), plus node_modules if present."""
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    modules = ROOT / "labextension" / "node_modules"
    if modules.is_dir():
        subprocess.run(["cp", "-a", str(modules), str(dest / "labextension")], check=True)


def install(repo: Path, venv: Path, dirs: Path) -> None:
    """A fresh venv, then ``pip install -r binder/requirements.txt`` from the repo root."""
    run([sys.executable, "-m", "venv", str(venv)], cwd=repo, env=dict(os.environ))
    pins = dirs / "constraints.txt"
    pins.write_text(f"llama-cpp-python=={version('llama_cpp_python')}\n")
    env = venv_env(
        venv,
        dirs,
        PIP_CONSTRAINT=str(pins),
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        npm_config_prefer_offline="true",
    )
    pip = str(venv / "bin" / "pip")
    run([pip, "install", "-q", "-r", "binder/requirements.txt"], cwd=repo, env=env, timeout=780)


@pytest.fixture(scope="module")
def binder(tmp_path_factory: pytest.TempPathFactory) -> BinderEnv:
    """The repository installed from binder/ into a fresh venv, postBuild done."""
    work = tmp_path_factory.mktemp("binder")
    repo, venv, dirs = work / "repo", work / "venv", work / "dirs"
    for folder in (repo, dirs / "config", dirs / "data", dirs / "runtime", dirs / "hf"):
        folder.mkdir(parents=True)
    copy_checkout(repo)
    install(repo, venv, dirs)
    post_build = [str(repo / "binder" / "postBuild")]
    offline = run(post_build, cwd=repo, env=venv_env(venv, dirs, HF_HUB_OFFLINE="1"))
    skip = venv_env(venv, dirs, SUPERFLUID_SKIP_MODEL_DOWNLOAD="1")
    skipped = run(post_build, cwd=repo, env=skip)
    return BinderEnv(repo, venv, dirs, offline, skipped)


def test_postbuild_serves_the_tiny_models_when_the_download_is_off(binder: BinderEnv) -> None:
    assert "SUPERFLUID_SKIP_MODEL_DOWNLOAD is set" in binder.skipped_log
    assert "downloading" not in binder.skipped_log
    assert "WARNING: the download failed" in binder.offline_log  # offline: same fallback
    assert binder.config == {"Superfluid": {"models": TINY, "kv_tokens": 4096}}
    source = (ROOT / "binder" / "postBuild").read_text()
    for words in ('"unsloth/Qwen3-0.6B-GGUF"', '"Qwen3-0.6B-Q4_K_M.gguf"', "0.4 GB", "Apache-2.0"):
        assert words in source  # the real model it downloads otherwise, named with its size


def test_start_sets_threads_from_the_cpu_quota(binder: BinderEnv, tmp_path: Path) -> None:
    config_file = binder.venv / "etc/jupyter/jupyter_server_config.json"
    saved = config_file.read_text()
    cgroup = tmp_path / "cgroup"
    cgroup.mkdir()
    env = venv_env(binder.venv, binder.dirs, SUPERFLUID_CGROUP_ROOT=str(cgroup))
    start = str(binder.repo / "binder" / "start")
    try:
        (cgroup / "cpu.max").write_text("150000 100000\n")  # 1.5 CPUs
        assert run([start, "echo", "handed over"], cwd=binder.repo, env=env) == "handed over\n"
        assert binder.config["Superfluid"] == {"models": TINY, "kv_tokens": 4096, "threads": 2}
        config_file.write_text(saved)
        (cgroup / "cpu.max").write_text("max 100000\n")  # no quota: nothing to set
        run([start, "true"], cwd=binder.repo, env=env)
        assert config_file.read_text() == saved
    finally:
        config_file.write_text(saved)


@pytest.fixture
def lab(binder: BinderEnv) -> Iterator[str]:
    """JupyterLab from the venv, started through binder/start; its URL with base path."""
    port = free_port()
    cmd = [str(binder.repo / "binder" / "start"), str(binder.venv / "bin" / "jupyter"), "lab"]
    cmd += [
        "--no-browser",
        f"--port={port}",
        f"--ServerApp.token={TOKEN}",
        f"--ServerApp.base_url={BASE}",
        f"--ServerApp.root_dir={binder.repo}",
        *(["--allow-root"] if os.geteuid() == 0 else []),
    ]
    log = binder.dirs / f"lab-{port}.log"
    env = venv_env(binder.venv, binder.dirs, HF_HUB_OFFLINE="1")
    with open(log, "wb") as out:
        server = subprocess.Popen(
            cmd, cwd=binder.repo, env=env, stdout=out, stderr=subprocess.STDOUT
        )
    url = f"http://127.0.0.1:{port}{BASE}"
    try:
        wait_until_up(url, server, log)
        yield url
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def wait_until_up(url: str, server: subprocess.Popen[bytes], log: Path) -> None:
    """Poll the server's status until it answers; fail with its log if it dies or hangs."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise AssertionError(f"JupyterLab exited {server.returncode}:\n{log.read_text()}")
        try:
            if get(url, "api/status").status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise AssertionError(f"JupyterLab did not start:\n{log.read_text()}")


def get(url: str, path: str) -> httpx.Response:
    """A GET on the server with its token."""
    headers = {"Authorization": f"token {TOKEN}"}
    return httpx.get(url + path, headers=headers, timeout=30, trust_env=False)


def test_quickstart_runs_on_the_binder_server(binder: BinderEnv, lab: str) -> None:
    assert [m["id"] for m in get(lab, "v1/models").json()["data"]] == TINY
    extensions = {e["name"]: e for e in get(lab, "lab/api/extensions").json()}
    assert extensions["jupyter-superfluid"]["enabled"]  # the front-end was built and installed
    headers = {"Authorization": f"token {TOKEN}"}
    r = httpx.post(lab + "api/kernels", json={"name": "python3"}, headers=headers, timeout=60)
    kernel_id = r.json()["id"]
    connection_file = binder.dirs / "runtime" / f"kernel-{kernel_id}.json"
    nb = read_notebook("01-quickstart")
    asyncio.run(execute(nb, connection_file))
    assert not problems(nb), "\n".join(problems(nb))
    out = stdout(nb)
    assert "model: superfluid/tiny-qwen3" in out  # the first model the Binder config serves
    # The kernel found its server by itself, base URL and all.
    assert re.search(r"^server: http://(localhost|127\.0\.0\.1):\d+/user/ada/v1/$", out, re.M)
    assert "NOTE: a built-in tiny test model is active" in out
    assert "response id: resp_" in out and "continued: resp_" in out

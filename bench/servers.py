"""Start the servers compared, on loopback, each as a subprocess with its own log.

- ``superfluid``: ``python -m jupyter_superfluid serve`` (standalone);
- ``llama_cpp.server``: ``python -m llama_cpp.server`` on the same GGUF;
- ``jupyter``: ``jupyter server`` with the extension and a token;
- ``llama-server``: llama.cpp's C++ server (``--with-llama-server``).

Every server gets the same per-conversation context, threads and batch size.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from bench import memory
from bench.config import BenchConfig
from bench.memory import process_tree, rss_bytes
from bench.model import MODEL_ID

JUPYTER_TOKEN = "bench-token"


def free_port() -> int:
    """An unused TCP port on loopback."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _tree_sum(pid: int, measure: Callable[[int], float]) -> float:
    """``measure`` summed over ``pid`` and its descendants (ones that just ended count 0)."""
    total = 0.0
    for p in process_tree(pid):
        with contextlib.suppress(OSError, RuntimeError):
            total += measure(p)
    return total


def cpu_seconds(pid: int) -> float:
    """CPU time process ``pid`` has used (user + system, from /proc), in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Server:
    """A started server: where it listens and how to stop it."""

    name: str
    url: str  # http://127.0.0.1:PORT (Jupyter: with no trailing slash)
    process: subprocess.Popen[bytes]
    log_path: Path
    headers: dict[str, str]

    @property
    def pid(self) -> int:
        """The server's process id."""
        return self.process.pid

    def rss(self) -> int:
        """The server's resident memory with its engine processes', in bytes."""
        return int(_tree_sum(self.pid, rss_bytes))

    def cpu(self) -> float:
        """The CPU time of the server and its engine processes so far, in seconds."""
        return _tree_sum(self.pid, cpu_seconds)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 20 s."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def _launch(
    name: str,
    cmd: list[str],
    workdir: Path,
    port: int,
    ready: Callable[[str], bool],
    headers: dict[str, str] | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 180,
) -> Server:
    """Start ``cmd`` and poll ``ready(url)`` until true; raise with its log if it dies."""
    workdir.mkdir(parents=True, exist_ok=True)
    log_path = workdir / f"{name}-{port}.log"
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env
        )
    server = Server(name, f"http://127.0.0.1:{port}", proc, log_path, headers or {})
    memory.watch(name, proc)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{name} exited {proc.returncode}:\n{log_path.read_text()[-3000:]}")
        with contextlib.suppress(httpx.HTTPError, ValueError, KeyError):
            if ready(server.url):
                return server
        time.sleep(0.2)
    server.stop()
    raise RuntimeError(f"{name} not ready in {timeout}s:\n{log_path.read_text()[-3000:]}")


def _superfluid_loaded(base: str, headers: dict[str, str]) -> Callable[[str], bool]:
    """A readiness check: the bench model is loaded (not only the port open)."""

    def ready(url: str) -> bool:
        r = httpx.get(f"{url}{base}/v1/models/{MODEL_ID}", headers=headers, timeout=5)
        return bool(r.status_code == 200 and r.json()["superfluid"].get("loaded"))

    return ready


def superfluid_args(cfg: BenchConfig, model: Path, kv_tokens: int) -> list[str]:
    """The engine settings of a standalone superfluid server."""
    args = [
        f"--model={MODEL_ID}={model}",
        f"--ctx-size={cfg.ctx_size}",
        f"--threads={cfg.threads}",
        f"--cache-slots={cfg.cache_slots}",
    ]
    return args + ([f"--kv-tokens={kv_tokens}"] if kv_tokens else [])


def start_superfluid(
    cfg: BenchConfig,
    model: Path,
    workdir: Path,
    kv_tokens: int = 0,
    extra: tuple[str, ...] = (),
    sessions: Path | None = None,
) -> Server:
    """The standalone superfluid server (``kv_tokens`` 0: its default).

    ``extra``: more flags, replacing the defaults they name (``--threads=1``);
    ``sessions``: the store to serve (default: a fresh one), so that a restarted
    server can continue what the one before it stored.
    """
    port = free_port()
    named = {flag.split("=", 1)[0] for flag in extra}
    defaults = superfluid_args(cfg, model, kv_tokens or cfg.kv_tokens)
    cmd = [
        sys.executable,
        "-m",
        "jupyter_superfluid",
        "serve",
        f"--port={port}",
        "--host=127.0.0.1",
        f"--sessions-dir={sessions or workdir / f'sessions-{port}'}",
        f"--model-cache-dir={workdir / 'model-cache'}",
        *(flag for flag in defaults if flag.split("=", 1)[0] not in named),
        *extra,
    ]
    return _launch("superfluid", cmd, workdir, port, _superfluid_loaded("", {}))


def start_superfluid_over(remote_url: str, workdir: Path, extra: tuple[str, ...] = ()) -> Server:
    """The standalone superfluid serving the bench model from a remote llama-server.

    ``remote_url``: one URL, or several comma-separated (a pool); ``extra``: more flags.
    """
    return start_superfluid_remote(f"llama-server:{remote_url}", workdir, extra)


def start_superfluid_remote(
    remote_spec: str, workdir: Path, extra: tuple[str, ...] = (), name: str = "llama-server"
) -> Server:
    """The standalone superfluid serving ``MODEL_ID`` from a remote (``KIND:URL[#…]``)."""
    port = free_port()
    cmd = [
        sys.executable,
        "-m",
        "jupyter_superfluid",
        "serve",
        f"--port={port}",
        "--host=127.0.0.1",
        f"--sessions-dir={workdir / f'sessions-{port}'}",
        f"--model={MODEL_ID}={remote_spec}",
        *extra,
    ]
    return _launch(f"superfluid-over-{name}", cmd, workdir, port, _superfluid_loaded("", {}))


def llama_cpp_server_available() -> bool:
    """Whether ``llama_cpp.server`` imports (the ``[bench]`` extra is installed)."""
    try:
        import llama_cpp.server.app  # noqa: F401
    except ImportError:
        return False
    return True


def start_llama_cpp_server(cfg: BenchConfig, model: Path, workdir: Path) -> Server:
    """``python -m llama_cpp.server`` on the same GGUF and settings.

    ``--interrupt_requests False``: by default a new request cuts off the one
    streaming, which would turn every concurrent stream into an error.
    """
    port = free_port()
    cmd = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        f"--model={model}",
        f"--model_alias={MODEL_ID}",
        "--host=127.0.0.1",
        f"--port={port}",
        f"--n_ctx={cfg.ctx_size}",
        f"--n_threads={cfg.threads}",
        f"--n_threads_batch={cfg.threads}",
        f"--n_batch={cfg.n_batch}",
        "--interrupt_requests=False",
    ]

    def ready(url: str) -> bool:
        return httpx.get(url + "/v1/models", timeout=5).status_code == 200

    return _launch("llama_cpp.server", cmd, workdir, port, ready)


def start_jupyter(cfg: BenchConfig, model: Path, workdir: Path) -> Server:
    """``jupyter server`` with the extension, token auth, the bench model preloaded."""
    port = free_port()
    home = workdir / f"jupyter-{port}"
    for sub in ("config", "data", "runtime", "root"):
        (home / sub).mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "JUPYTER_CONFIG_DIR": str(home / "config"),
        "JUPYTER_DATA_DIR": str(home / "data"),
        "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
    }
    s = "--Superfluid."
    cmd = [
        str(Path(sys.executable).with_name("jupyter")),
        "server",
        "--no-browser",
        f"--port={port}",
        "--ServerApp.ip=127.0.0.1",
        "--allow-root",
        f"--IdentityProvider.token={JUPYTER_TOKEN}",
        f"--ServerApp.root_dir={home / 'root'}",
        "--ServerApp.jpserver_extensions=jupyter_superfluid=True",
        f"{s}models={MODEL_ID}={model}",
        f"{s}sessions_dir={home / 'sessions'}",
        f"{s}model_cache_dir={home / 'models'}",
        f"{s}context_size={cfg.ctx_size}",
        f"{s}threads={cfg.threads}",
        f"{s}cache_slots={cfg.cache_slots}",
    ]
    cmd += [f"{s}kv_tokens={cfg.kv_tokens}"] if cfg.kv_tokens else []
    headers = {"Authorization": f"token {JUPYTER_TOKEN}"}
    ready = _superfluid_loaded("", headers)
    return _launch("jupyter", cmd, workdir, port, ready, headers=headers, env=env)


def start_llama_server(binary: Path, cfg: BenchConfig, model: Path, workdir: Path, slots: int):
    """llama.cpp's C++ ``llama-server`` with ``slots`` parallel slots of ``ctx_size`` each."""
    port = free_port()
    cmd = [
        str(binary),
        "-m",
        str(model),
        "--alias",
        MODEL_ID,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "-c",
        str(cfg.ctx_size * slots),
        "-np",
        str(slots),
        "-t",
        str(cfg.threads),
        "-b",
        str(cfg.n_batch),
        "--flash-attn",
        "off",
    ]

    def ready(url: str) -> bool:
        return httpx.get(url + "/health", timeout=5).status_code == 200

    return _launch(f"llama-server-{slots}", cmd, workdir, port, ready)


@contextlib.contextmanager
def running(start: Callable[[], Server]) -> Iterator[Server]:
    """Start a server for the ``with`` block and stop it after."""
    server = start()
    try:
        yield server
    finally:
        server.stop()

"""Zero-configuration OpenAI clients for the superfluid server this kernel runs under.

Inside a kernel started by a Jupyter server that runs the extension (JupyterLab,
Notebook 7, Binder/JupyterHub with a base URL prefix, token auth on),
``client()`` finds that server by itself:

1. the kernel's connection file gives the kernel id (``kernel-<id>.json``);
2. the ``jpserver-*.json`` files in the connection file's directory and in Jupyter's
   runtime dir list the running servers (url with base path, token);
3. the server whose ``api/kernels/<id>`` knows this kernel (asked with its token, or
   with ``JUPYTERHUB_API_TOKEN``) is the one; its ``v1/`` must answer, or the error
   says the extension is not enabled there;
4. else, on JupyterHub, ``JUPYTERHUB_SERVICE_URL`` (or a running server whose base
   URL is ``JUPYTERHUB_SERVICE_PREFIX``) with ``JUPYTERHUB_API_TOKEN``;
5. else, in a kernel, the standalone server at its default address if it answers;
   outside a kernel, the standalone default without asking.

When nothing answers, ``ServerNotFound`` says what was tried.

Environment variables override discovery, and arguments override everything:

- ``SUPERFLUID_BASE_URL``: the full OpenAI base URL, ending in ``/v1``
  (e.g. ``http://127.0.0.1:8453/v1`` or ``https://hub.example/user/ada/v1``);
- ``SUPERFLUID_API_KEY``: the bearer token (a Jupyter token or a superfluid key);
  with only this set, the URL is still discovered;
- ``SUPERFLUID_MODEL``: the model ``%%respond`` uses when none is chosen.

The notebook side talks HTTP only: nothing here imports the engine or the server.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

ENV_BASE_URL = "SUPERFLUID_BASE_URL"
ENV_API_KEY = "SUPERFLUID_API_KEY"
ENV_MODEL = "SUPERFLUID_MODEL"
STANDALONE_BASE_URL = "http://127.0.0.1:8453/v1"
NO_KEY = "unused"  # the SDK insists on some key; servers without auth ignore it
PROBE_TIMEOUT = 3.0


class ServerNotFound(RuntimeError):
    """No superfluid server could be found; the message lists what was tried."""


@dataclass(frozen=True)
class Endpoint:
    """Where a superfluid server answers: its OpenAI base URL, key, and how it was found."""

    base_url: str  # .../v1, no trailing slash
    api_key: str
    source: str

    @property
    def root(self) -> str:
        """The server's root URL (base path included), with a trailing slash."""
        return re.sub(r"/v1/?$", "", self.base_url.rstrip("/")) + "/"

    @property
    def lmsp_url(self) -> str:
        """The LMSP base URL (``…/lmsp/v1``)."""
        return self.root + "lmsp/v1"


_cache: Endpoint | None = None


def find_server(*, refresh: bool = False) -> Endpoint:
    """The superfluid server for this process: environment overrides, else discovery."""
    global _cache
    env_url = os.environ.get(ENV_BASE_URL, "").strip()
    env_key = os.environ.get(ENV_API_KEY, "").strip()
    if env_url:
        return Endpoint(env_url.rstrip("/"), env_key or NO_KEY, ENV_BASE_URL)
    if _cache is None or refresh:
        _cache = _discover()
    return replace(_cache, api_key=env_key) if env_key else _cache


def forget_server() -> None:
    """Drop the cached discovery, so that the next call looks again."""
    global _cache
    _cache = None


def endpoint(base_url: str | None = None, api_key: str | None = None) -> Endpoint:
    """The endpoint with explicit arguments applied over ``find_server()``."""
    if base_url:
        key = api_key or os.environ.get(ENV_API_KEY, "").strip() or NO_KEY
        return Endpoint(base_url.rstrip("/"), key, "argument")
    found = find_server()
    return replace(found, api_key=api_key) if api_key else found


def client(**overrides: Any) -> Any:
    """An ``openai.OpenAI`` client for this server; keyword arguments override anything."""
    import openai

    ep = endpoint(overrides.pop("base_url", None), overrides.pop("api_key", None))
    return openai.OpenAI(base_url=ep.base_url, api_key=ep.api_key, **overrides)


def async_client(**overrides: Any) -> Any:
    """An ``openai.AsyncOpenAI`` client for this server; keyword arguments override anything."""
    import openai

    ep = endpoint(overrides.pop("base_url", None), overrides.pop("api_key", None))
    return openai.AsyncOpenAI(base_url=ep.base_url, api_key=ep.api_key, **overrides)


def lmsp_base_url(base_url: str | None = None) -> str:
    """The LMSP base URL (``…/lmsp/v1``) of this server, or of the given OpenAI base URL."""
    return endpoint(base_url).lmsp_url


# --- discovery --------------------------------------------------------------------------


def _discover() -> Endpoint:
    """Find the server by kernel, then JupyterHub, then the standalone default."""
    tried: list[str] = []
    conn = _connection_file()
    if conn is not None:
        found = _by_kernel(conn, tried)
        if found is not None:
            return found
    hub = _by_hub(tried)
    if hub is not None:
        return hub
    if conn is None:
        return Endpoint(STANDALONE_BASE_URL, NO_KEY, "standalone default (not in a kernel)")
    status = _probe(STANDALONE_BASE_URL + "/models", NO_KEY)
    if status == 200:
        return Endpoint(STANDALONE_BASE_URL, NO_KEY, "standalone default")
    tried.append(f"the standalone default {STANDALONE_BASE_URL} ({_say(status)})")
    raise ServerNotFound(
        "No jupyter_superfluid server found. Tried: "
        + "; ".join(tried)
        + f". Set {ENV_BASE_URL} (…/v1) and {ENV_API_KEY}, or pass base_url= and api_key=."
    )


def _connection_file() -> Path | None:
    """This kernel's connection file, or None outside a kernel."""
    try:
        from ipykernel.connect import get_connection_file

        return Path(get_connection_file()).resolve()
    except (ImportError, RuntimeError, OSError):
        pass
    argv = sys.argv
    for i, arg in enumerate(argv):  # a kernel started as `python -m ipykernel_launcher -f X`
        if arg == "-f" and i + 1 < len(argv):
            return Path(argv[i + 1]).resolve()
        if arg.startswith(("--f=", "-f=")):
            return Path(arg.split("=", 1)[1]).resolve()
    return None


def _kernel_id(conn: Path) -> str | None:
    """The kernel id in a jupyter_server connection file name (``kernel-<id>.json``)."""
    match = re.fullmatch(r"kernel-(.+)\.json", conn.name)
    return match.group(1) if match else None


def _servers(dirs: list[Path]) -> Iterator[dict[str, Any]]:
    """Running Jupyter servers' info (url, token, base_url…) from these runtime dirs."""
    seen: set[str] = set()
    for folder in dirs:
        if not folder.is_dir():
            continue
        for path in sorted(folder.glob("jpserver-*.json")):
            try:
                info = json.loads(path.read_text())
            except (OSError, ValueError):
                continue  # being written, or unreadable: not ours to fix
            url = info.get("url")
            if url and url not in seen and _alive(info.get("pid")):
                seen.add(url)
                yield info


def _alive(pid: Any) -> bool:
    """Whether a process with this pid exists (stale info files outlive their server)."""
    if not isinstance(pid, int):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _runtime_dirs(conn: Path) -> list[Path]:
    """Where server info files may be: next to the connection file, and the runtime dir."""
    dirs = [conn.parent]
    try:
        from jupyter_core.paths import jupyter_runtime_dir

        dirs.append(Path(jupyter_runtime_dir()).resolve())
    except ImportError:
        pass
    return list(dict.fromkeys(dirs))


def _by_kernel(conn: Path, tried: list[str]) -> Endpoint | None:
    """The Jupyter server that lists this kernel, with a token it accepts."""
    kid = _kernel_id(conn)
    if kid is None:
        tried.append(f"the connection file {conn.name} (not named by a Jupyter server)")
        return None
    hub_token = os.environ.get("JUPYTERHUB_API_TOKEN", "")
    servers = list(_servers(_runtime_dirs(conn)))
    if not servers:
        tried.append(f"Jupyter servers in {conn.parent} (none running)")
    for info in servers:
        url = info["url"] if info["url"].endswith("/") else info["url"] + "/"
        statuses: list[str] = []
        # Its own token; on JupyterHub the server's token may be empty and the hub's works.
        tokens = [info.get("token") or "", *([hub_token] if hub_token else [])]
        for token in dict.fromkeys(tokens):
            status = _probe(f"{url}api/kernels/{kid}", token)
            if status == 200:
                return _checked(url, token, f"the Jupyter server at {url} running this kernel")
            statuses.append(_say(status))
        tried.append(f"the Jupyter server at {url} ({', '.join(dict.fromkeys(statuses))})")
    return None


def _checked(root: str, token: str, source: str) -> Endpoint:
    """The endpoint at ``root`` once its ``v1/models`` answers; else a clear error."""
    status = _probe(root + "v1/models", token)
    if status == 200:
        return Endpoint(root + "v1", token or NO_KEY, source)
    raise ServerNotFound(
        f"Found {source}, but its {root}v1/models answered {_say(status)}: is the "
        "jupyter_superfluid server extension enabled there? "
        "(`jupyter server extension enable jupyter_superfluid`, then restart the server)"
    )


def _by_hub(tried: list[str]) -> Endpoint | None:
    """A JupyterHub single-user server, from the environment the hub gives it."""
    prefix = os.environ.get("JUPYTERHUB_SERVICE_PREFIX", "")
    token = os.environ.get("JUPYTERHUB_API_TOKEN", "")
    if not (prefix or os.environ.get("JUPYTERHUB_SERVICE_URL")):
        return None
    root = _hub_root(prefix)
    if root is None:
        tried.append(f"JupyterHub prefix {prefix} (no server URL: JUPYTERHUB_SERVICE_URL unset)")
        return None
    status = _probe(root + "v1/models", token)
    if status == 200:
        return Endpoint(root + "v1", token or NO_KEY, f"the JupyterHub server at {root}")
    tried.append(f"the JupyterHub server at {root} ({_say(status)})")
    return None


def _hub_root(prefix: str) -> str | None:
    """The single-user server's own URL with its prefix, reachable from this machine."""
    url = os.environ.get("JUPYTERHUB_SERVICE_URL", "")
    if url:
        # The service URL is the address it binds; a wildcard host is reached on loopback.
        url = re.sub(r"//(0\.0\.0\.0|\[::\]|)(?=[:/])", "//127.0.0.1", url)
        return url if url.endswith("/") else url + "/"
    try:
        from jupyter_core.paths import jupyter_runtime_dir
    except ImportError:
        return None
    for info in _servers([Path(jupyter_runtime_dir())]):
        if info.get("base_url") == prefix:
            return str(info["url"]).rstrip("/") + "/"
    return None


def _probe(url: str, token: str) -> int | None:
    """The HTTP status of a GET with this token, or None when nothing answers."""
    import httpx

    headers = {"Authorization": f"token {token}"} if token else {}
    try:
        # trust_env=False: a proxy configured for the internet must not see loopback calls.
        with httpx.Client(timeout=PROBE_TIMEOUT, trust_env=False) as http:
            return http.get(url, headers=headers).status_code
    except httpx.HTTPError:
        return None


def _say(status: int | None) -> str:
    """A probe's outcome in words."""
    if status is None:
        return "no answer"
    return f"HTTP {status}"

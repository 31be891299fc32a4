"""Helpers of the remote-engine tests: a real ``llama-server`` process one can stop and restart."""

from __future__ import annotations

import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

REMOTE_KEY = "remote-secret"
SLOTS = 4
SLOT_CONTEXT = 4096  # the tiny models' trained context


@dataclass
class RemoteServer:
    """A ``llama-server`` subprocess on one tiny model; stop and start it again at will."""

    binary: Path
    model: Path
    port: int
    log_path: Path
    slots: int = SLOTS
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """Its base URL."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> RemoteServer:
        """Start it on its port and wait until it serves."""
        cmd = [
            *(str(self.binary), "-m", str(self.model), "--host", "127.0.0.1"),
            *(
                "--port",
                str(self.port),
                "-np",
                str(self.slots),
                "-c",
                str(self.slots * SLOT_CONTEXT),
            ),
            *("-t", "1", "-tb", "1", "--api-key", REMOTE_KEY, "--metrics", "--no-webui"),
        ]
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"llama-server exited:\n{self.log_path.read_text()[-3000:]}")
            try:
                if httpx.get(self.url + "/health", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"llama-server did not start:\n{self.log_path.read_text()[-3000:]}")

    def stop(self, sig: int = signal.SIGTERM) -> None:
        """Stop it (``sig``; SIGKILL if it lingers)."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def get(self, path: str) -> Any:
        """GET one of its JSON endpoints, with its key."""
        headers = {"Authorization": f"Bearer {REMOTE_KEY}"}
        return httpx.get(self.url + path, headers=headers, timeout=10).json()

    def metrics(self) -> dict[str, float]:
        """Its Prometheus counters (``llamacpp:`` prefix dropped)."""
        headers = {"Authorization": f"Bearer {REMOTE_KEY}"}
        text = httpx.get(self.url + "/metrics", headers=headers, timeout=10).text
        pairs = (line.split() for line in text.splitlines() if line and line[0] != "#")
        return {name.removeprefix("llamacpp:"): float(value) for name, value in pairs}

    def wait_idle(self, timeout: float = 60) -> dict[str, float]:
        """Its counters once no request is being processed (fails past ``timeout``)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            counters = self.metrics()
            if counters["requests_processing"] == 0:
                return counters
            time.sleep(0.05)
        raise AssertionError("llama-server kept processing")

"""A real IPython kernel, driven over the Jupyter protocol as a front-end would.

``KernelFront`` keeps the widget models the kernel opens (comm_open, then each
``update``), records every comm message, and sends custom messages back, so the
widget tests check synced state and messages without a browser.
"""

from __future__ import annotations

import json
import os
import queue
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from jupyter_client.manager import KernelManager

WIDGET_TARGET = "jupyter.widget"


class KernelFront:
    """The widget side of a front-end, over a real kernel's channels."""

    def __init__(self, km: KernelManager) -> None:
        self.km = km
        self.kc = km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=60)
        self.models: dict[str, dict[str, Any]] = {}  # comm id -> current state
        self.messages: list[dict[str, Any]] = []  # every iopub message, in order
        self.custom: list[tuple[str, Any]] = []  # custom messages the kernel sent
        self._lock = threading.Condition()
        self._stop = False
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while not self._stop:
            try:
                msg = self.kc.get_iopub_msg(timeout=0.2)
            except queue.Empty:
                continue
            with self._lock:
                self._take(msg)
                self.messages.append(msg)
                self._lock.notify_all()

    def _take(self, msg: dict[str, Any]) -> None:
        kind, content = msg["msg_type"], msg["content"]
        if kind == "comm_open" and content.get("target_name") == WIDGET_TARGET:
            self.models[content["comm_id"]] = dict(content["data"]["state"])
        elif kind == "comm_msg" and content["comm_id"] in self.models:
            data = content["data"]
            if data.get("method") == "update":
                self.models[content["comm_id"]].update(data["state"])
            elif data.get("method") == "custom":
                self.custom.append((content["comm_id"], data["content"]))

    def updates(self, comm_id: str) -> list[dict[str, Any]]:
        """The state changes the kernel sent for one model, in order."""
        with self._lock:
            return [
                m["content"]["data"]["state"]
                for m in self.messages
                if m["msg_type"] == "comm_msg"
                and m["content"]["comm_id"] == comm_id
                and m["content"]["data"].get("method") == "update"
            ]

    def run(
        self, code: str, *, cell_id: str | None = None, timeout: float = 120, **expressions: str
    ) -> list[dict[str, Any]]:
        """Execute code (with JupyterLab's ``cellId`` when given); its iopub output.

        Keyword arguments are user expressions; their values land in ``self.values``.
        """
        metadata = {"cellId": cell_id} if cell_id else {}
        content = {
            "code": code,
            "silent": False,
            "store_history": True,
            "user_expressions": expressions,
            "allow_stdin": False,
            "stop_on_error": True,
        }
        msg = self.kc.session.msg("execute_request", content, metadata=metadata)
        self.kc.shell_channel.send(msg)
        msg_id = msg["header"]["msg_id"]
        reply = self.kc.get_shell_msg(timeout=timeout)
        while reply["parent_header"].get("msg_id") != msg_id:
            reply = self.kc.get_shell_msg(timeout=timeout)

        def mine(m: dict[str, Any]) -> bool:
            return bool(m["parent_header"].get("msg_id") == msg_id)

        def idle() -> bool:
            return any(
                mine(m) and m["msg_type"] == "status" and m["content"]["execution_state"] == "idle"
                for m in self.messages
            )

        self.wait(idle, timeout)
        with self._lock:
            out = [m for m in self.messages if mine(m)]
        if reply["content"]["status"] != "ok":
            raise AssertionError("\n".join(reply["content"].get("traceback", [])))
        self.values = {}
        for key, value in reply["content"]["user_expressions"].items():
            if value["status"] != "ok":
                raise AssertionError(f"{key}: {value['ename']}: {value['evalue']}")
            self.values[key] = value["data"]["text/plain"]
        return out

    def value(self, expr: str) -> Any:
        """The value of an expression in the kernel, as JSON (pydantic models dumped)."""
        dump = "lambda o: o.model_dump(mode='json')"
        self.run("", v=f"__import__('json').dumps({expr}, default={dump})")
        return json.loads(eval(self.values["v"]))  # the repr of a str

    def comm_of(self, name: str) -> str:
        """The comm id of a widget held by a kernel variable."""
        return str(self.value(f"{name}.comm.comm_id"))

    def send_custom(self, comm_id: str, content: dict[str, Any]) -> None:
        """A custom message to a widget, as a view's ``send`` makes it."""
        data = {"method": "custom", "content": content}
        msg = self.kc.session.msg("comm_msg", {"comm_id": comm_id, "data": data})
        self.kc.shell_channel.send(msg)

    def wait(self, predicate: Callable[[], bool], timeout: float = 60) -> None:
        """Block until ``predicate()`` holds (checked on every iopub message)."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while not predicate():
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError("the kernel did not get there in time")
                self._lock.wait(min(left, 0.5))

    def close(self) -> None:
        """Stop reading and stop the kernel."""
        self._stop = True
        self._reader.join(timeout=5)
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=True)


@pytest.fixture(scope="module")
def front(standalone: Any) -> Iterator[KernelFront]:
    """A kernel whose zero-config client finds the shared standalone server."""
    env = {**os.environ, "SUPERFLUID_BASE_URL": standalone.base_url, "SUPERFLUID_API_KEY": "k"}
    env.pop("SUPERFLUID_WIDGETS", None)
    km = KernelManager(kernel_name="python3")
    km.start_kernel(env=env)
    kf = KernelFront(km)
    kf.run("import jupyter_superfluid")
    yield kf
    kf.close()

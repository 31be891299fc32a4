"""Launchers: how a model's engine is started, in this process or in one of its own.

A launcher is ``launch(model_id, path, **options) -> Engine``, plain or async. The
model registry calls it through ``launch``: a plain one (it blocks while the model
loads) runs in a thread, an async one on the event loop. ``launch_in_thread`` loads
``LlamaEngine`` here. Unloading a model is closing its engine.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from jupyter_superfluid.engine.base import Engine

Launcher = Callable[..., Engine | Awaitable[Engine]]


async def launch(launcher: Launcher, model_id: str, path: Path, **options: Any) -> Engine:
    """Run ``launcher``: awaited if it is async, in a thread if it blocks."""
    if inspect.iscoroutinefunction(launcher):
        return await launcher(model_id, path, **options)  # type: ignore[no-any-return]
    result = await asyncio.to_thread(launcher, model_id, path, **options)
    if inspect.isawaitable(result):
        return await result
    return result


def launch_in_thread(model_id: str, path: Path, **options: Any) -> Engine:
    """Load ``LlamaEngine`` in this process (blocking; the worker is a thread of this process)."""
    from jupyter_superfluid.engine.local.llama import (
        LlamaEngine,  # llama_cpp loads only when a model does
    )

    return LlamaEngine.load(model_id, path, **options)


async def launch_in_process(model_id: str, path: Path, **options: Any) -> Engine:
    """Start a supervised engine process that loads the model; its client once loaded."""
    from jupyter_superfluid.engine.process.client import ProcessEngine

    return await ProcessEngine.start(model_id, path, **options)


def launcher_for(
    isolation: str,
    *,
    restart_wait: float | None = None,
    stall_timeout: float | None = None,
    stream_interval: float | None = None,
) -> Launcher:
    """The launcher of an ``engine_isolation`` setting ("process" or "thread").

    ``restart_wait``, ``stall_timeout`` and ``stream_interval``
    (``ProcessEngine.start``) apply to engine processes; None keeps their defaults.
    """
    if isolation == "thread":
        return launch_in_thread
    if isolation != "process":
        raise ValueError(f"unknown engine isolation {isolation!r} (process or thread)")
    settings = {
        "restart_wait": restart_wait,
        "stall_timeout": stall_timeout,
        "stream_interval": stream_interval,
    }
    given: dict[str, Any] = {name: value for name, value in settings.items() if value is not None}
    if not given:
        return launch_in_process
    return functools.partial(launch_in_process, **given)

"""Launchers: how a model's engine is started, in this process or in one of its own.

A launcher is ``launch(model_id, path, **options) -> Engine``, plain or async. The
model registry calls it through ``launch``: a plain one (it blocks while the model
loads) runs in a thread, an async one on the event loop. ``launch_in_thread`` loads
``LlamaEngine`` here. Unloading a model is closing its engine.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from .base import Engine

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
    from .local.llama import LlamaEngine  # llama_cpp loads only when a model does

    return LlamaEngine.load(model_id, path, **options)

"""A standalone superfluid server that downloads from a hub on loopback (``local_hub``).

Each hub file holds a different built-in model's bytes: files with equal bytes would
share one blob in the cache (and one download).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import pytest

from jupyter_superfluid.builtin_models.tiny_gguf import ensure_builtin
from jupyter_superfluid.pytest_plugin import StandaloneServer, start_standalone
from support.local_hub import LocalHub

REPO = "sf-test/tiny-GGUF"
CHATML = "superfluid/tiny-chatml"
BUILT_INS = (
    "superfluid/tiny-qwen3",
    "superfluid/tiny-chatml",
    "superfluid/tiny-vision",
    "superfluid/tiny-audio",
)


@contextmanager
def hub_serving(files: Mapping[str, bytes]) -> Iterator[LocalHub]:
    """A hub on loopback serving ``REPO/NAME.gguf`` for each file; stopped on leaving."""
    hub = LocalHub().start()
    for name, data in files.items():
        hub.add(REPO, f"{name}.gguf", data)
    try:
        yield hub
    finally:
        hub.release()
        hub.stop()


def hub_files(cache: Path, names: list[str]) -> dict[str, bytes]:
    """Real GGUF bytes for each name (a different built-in model each, up to four)."""
    if len(names) > len(BUILT_INS):
        raise ValueError(f"at most {len(BUILT_INS)} distinct files")
    chosen = BUILT_INS[: len(names)]
    return {
        name: ensure_builtin(m, cache).read_bytes() for name, m in zip(names, chosen, strict=True)
    }


def serve_with_hub(
    hub: LocalHub,
    cache: Path,
    work: Path,
    *args: str,
    home: Path | None = None,
    models: tuple[str, ...] = (CHATML,),
    **kw: object,
) -> StandaloneServer:
    """A standalone server on ``models``, with ``HF_ENDPOINT`` at ``hub`` and its own HF home.

    It waits up to 2 s for a model (``--model-wait``) and does not preload.
    """
    with pytest.MonkeyPatch.context() as env:
        env.setenv("HF_ENDPOINT", hub.url)
        env.setenv("HF_HOME", str(home or work / "hf-home"))
        for name in ("HF_HUB_CACHE", "HF_HUB_OFFLINE", "HF_TOKEN"):
            env.delenv(name, raising=False)
        return start_standalone(
            cache,
            work,
            "--model-wait=2",
            "--Superfluid.preload=False",
            *args,
            models=models,
            **kw,  # type: ignore[arg-type]
        )

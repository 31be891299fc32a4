"""A test model slower than the tiny ones (random weights, 8 layers, 512 wide, f16), and
a server whose KV cache holds one conversation's window, shared by two slots."""

from __future__ import annotations

import contextlib
import hashlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from jupyter_superfluid.builtin_models import tiny_gguf as testmodels
from jupyter_superfluid.builtin_models.templates import CHATML

SLOW_CONTEXT = 4096
# 2048 KV cells for two slots, on one thread: the slow model at ~200 tokens/s.
CRAMPED_ARGS = ("--cache-slots=2", "--kv-tokens=2048", "--threads=1")
# Its ChatML turn is ~2030 tokens (one a character): it fits the 2048 cells alone, never
# beside the ~90 that ``RUNNING_TEXT``'s turn holds (its last prompt chunk finds the cache
# full, and the newest sequence is the one that fails). The two share no text past the
# turn's opening: a shared prefix is shared cells (the new sequence starts from a copy),
# and with "ab" in both the newer one fitted whenever the running one had generated
# fewer than ~20 tokens by then, which depended on timing.
TOO_LONG_BESIDE = "cd" * 1006
RUNNING_TEXT = "ab" * 40


def slow_model(cache: Path) -> Path:
    """A ChatML model big enough (8 layers, 512 wide) that one thread generates ~200 tokens/s.

    The tiny models run at thousands of tokens a second, faster than a client can act
    on a stream; this one lets a test disconnect while an engine is still generating,
    or run one decoding step that lasts (a 512-token prompt chunk takes about a second).
    """
    digest = hashlib.sha256(Path(testmodels.__file__).read_bytes()).hexdigest()[:12]
    return testmodels.build_cached(
        cache / f"slow-8x512-{digest}.gguf",
        chat_template=CHATML,
        n_layer=8,
        n_embd=512,
        n_head=8,
        context_length=SLOW_CONTEXT,
        seed=1,
        f16=True,
        name="slow",
    )


def _drain(lines: Iterator[str]) -> None:
    """Read a stream's lines to its end, or until it is closed under us."""
    with contextlib.suppress(Exception):
        for _ in lines:
            pass


@contextmanager
def generating(url: str, body: dict[str, Any]) -> Iterator[None]:
    """``body`` streaming from ``url`` (POST), seen generating: its first text delta came.

    With 1500 tokens to generate on the slow model, it is still generating for over
    a thousand steps after that: a request made meanwhile runs beside it. Leaving
    closes the stream, which cancels it.
    """
    with httpx.stream("POST", url, json=body, timeout=120) as r:
        assert r.status_code == 200, r.read()
        lines = r.iter_lines()  # kept: a dropped reader would close the stream at once
        next(line for line in lines if "response.output_text.delta" in line)
        # Read on meanwhile: a client that stops reading fills the server's send buffer,
        # the server then paces the generation (it waits for the client), and a paused
        # answer is no longer "certainly generating" beside the request under test.
        reader = threading.Thread(target=_drain, args=(lines,), daemon=True)
        reader.start()
        yield

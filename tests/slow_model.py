"""A test model slower than the tiny ones: random weights, 8 layers, 512 wide, f16."""

from __future__ import annotations

import hashlib
from pathlib import Path

from jupyter_superfluid.engine import testmodels
from jupyter_superfluid.engine.tiny_templates import CHATML

SLOW_CONTEXT = 4096


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

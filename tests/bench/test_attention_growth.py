"""``python -m bench.attention_growth`` runs in its tiny configuration and reports every length.

Nothing here looks at a timing (benchmarks are not tests): both attention settings run
the turn over every history length, and the table has a row per length and the growth.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # ``bench`` is a top-level package of the repository
    sys.path.insert(0, str(ROOT))

from bench import config  # noqa: E402
from bench.attention_growth import LAYOUTS, run, table  # noqa: E402


def test_every_history_length_runs_with_and_without_flash_attention() -> None:
    cfg = config.tiny()
    results = run(cfg, reps=1)
    assert list(results) == list(LAYOUTS)
    assert all(list(by_length) == sorted(cfg.histories) for by_length in results.values())
    assert all(ms > 0 for by_length in results.values() for ms in by_length.values())
    rows = table(results).splitlines()
    assert len(rows) == 2 + len(cfg.histories) + 1
    assert rows[-1].startswith("| longest / shortest |")

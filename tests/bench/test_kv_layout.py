"""``python -m bench.kv_layout`` runs in its tiny configuration and reports every measure.

Nothing here looks at a timing (benchmarks are not tests): both layouts are built,
every measure runs on each, and the table has a row per measure.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # ``bench`` is a top-level package of the repository
    sys.path.insert(0, str(ROOT))

from bench import config  # noqa: E402
from bench.kv_layout import measures, run, table  # noqa: E402


def test_both_layouts_run_every_measure() -> None:
    cfg = config.tiny()
    results = run(cfg, reps=1)
    names = list(measures(cfg))
    assert list(results) == ["unified", "a stream per slot"]
    assert all(list(by_name) == names for by_name in results.values())
    assert all(value > 0 for by_name in results.values() for value in by_name.values())
    rows = table(results).splitlines()
    assert len(rows) == 2 + len(names) and all(name in table(results) for name in names)

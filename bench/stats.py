"""Summaries of repeated measurements: median and spread, and ratios between them."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100) by linear interpolation between ranks."""
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def summary(values: Sequence[float], digits: int = 6) -> dict[str, Any]:
    """Median, p10, p90, min, max and count of ``values`` (None fields when empty)."""
    if not values:
        return {"n": 0, "median": None, "p10": None, "p90": None, "min": None, "max": None}
    return {
        "n": len(values),
        "median": round(statistics.median(values), digits),
        "p10": round(percentile(values, 10), digits),
        "p90": round(percentile(values, 90), digits),
        "min": round(min(values), digits),
        "max": round(max(values), digits),
    }


def latency_summary(values: Sequence[float], digits: int = 6) -> dict[str, Any]:
    """Like ``summary`` plus p50 and p99 (for many samples of a fast request)."""
    out = summary(values, digits)
    if values:
        out["p50"] = round(percentile(values, 50), digits)
        out["p99"] = round(percentile(values, 99), digits)
    return out


def ratio(numerator: dict[str, Any] | None, denominator: dict[str, Any] | None) -> float | None:
    """Ratio of two summaries' medians (None when either is missing or zero)."""
    if not numerator or not denominator:
        return None
    top, bottom = numerator.get("median"), denominator.get("median")
    if top is None or not bottom:
        return None
    return round(top / bottom, 4)

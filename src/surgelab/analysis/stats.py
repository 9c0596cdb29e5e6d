"""Exact statistics over raw values (no histograms, no sketches)."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = [
    "distribution", "gap_distribution", "PERCENTILES", "MIN_BEYOND", "min_count", "sparse_percentile", "percentile_interval",
    "rate_interval",
]

PERCENTILES = (50, 90, 95, 99)
MIN_BEYOND = 5  # values needed beyond a percentile before it is shown as a figure and used in a verdict


def min_count(q: float) -> int:
    """The fewest values a ``q``-th percentile needs: ``MIN_BEYOND`` of them beyond it (P99: 500, P90: 50, P50: 10)."""
    return int(np.ceil(MIN_BEYOND / (1.0 - q / 100.0) - 1e-9))


def sparse_percentile(count: int | None, q: float) -> bool:
    """True when a ``q``-th percentile of ``count`` values rests on fewer than ``MIN_BEYOND`` values beyond it.

    A P99 of 82 requests is the slowest one: one hiccup of client, network or server puts it there.
    """
    return (count or 0) < min_count(q)


def percentile_interval(values: np.ndarray, q: float, z: float = 1.96) -> tuple[float, float]:
    """The range that holds the true ``q``-th percentile with about 95 % confidence (``z`` = 1.96).

    Distribution-free: the number of values below the true percentile is binomial (n, q/100),
    so the interval runs between the order statistics ``n·q ± z·√(n·q·(1−q))`` (normal
    approximation). Where that rank falls past the smallest or largest value the bound is
    open (−inf / +inf): a P99 of 40 requests says nothing about how slow the next one is.
    """
    v = np.sort(np.asarray(values, dtype=np.float64))
    n = v.size
    if n == 0:
        return -np.inf, np.inf
    p = q / 100.0
    half = z * np.sqrt(n * p * (1.0 - p))
    low, high = int(np.floor(n * p - half)), int(np.ceil(n * p + half))  # 1-based ranks
    return (float(v[low - 1]) if low >= 1 else -np.inf), (float(v[high - 1]) if high <= n else np.inf)


def rate_interval(count: int, z: float = 1.96) -> tuple[float, float]:
    """Relative bounds on a rate estimated from ``count`` events (Poisson): 1 ± z/√count."""
    if count <= 0:
        return 0.0, np.inf
    half = z / float(np.sqrt(count))
    return max(0.0, 1.0 - half), 1.0 + half


def _empty() -> dict[str, float | int | None]:
    return {"count": 0, "mean": None, "min": None, **{f"p{q}": None for q in PERCENTILES}, "max": None}


def distribution(values: np.ndarray, scale: float = 1.0) -> dict[str, float | int | None]:
    """count, mean, min, p50, p90, p95, p99 and max of ``values`` × ``scale``.

    Works on one scaled copy, partitioned in place once mean, min and max are taken, so a
    large input costs one extra array rather than three.
    """
    values = np.asarray(values, dtype=np.float64)
    nan = np.isnan(values)
    if nan.any():
        values = values[~nan]
    del nan
    if values.size == 0:
        return _empty()
    values = values * scale
    mean, low, high = float(values.mean()), float(values.min()), float(values.max())
    qs = np.percentile(values, PERCENTILES, overwrite_input=True)
    return {"count": int(values.size), "mean": mean, "min": low, **{f"p{q}": float(v) for q, v in zip(PERCENTILES, qs)},
            "max": high}  # fmt: skip


def gap_distribution(gaps: Any) -> dict[str, float | int | None]:
    """``distribution`` of inter-token gaps from a ``Gaps.summary``, without holding the gaps as floats."""
    if gaps.n == 0:
        return _empty()
    qs = gaps.quantiles(np.true_divide(PERCENTILES, 100))
    return {"count": gaps.n, "mean": gaps.mean(), "min": gaps.min(), **{f"p{q}": float(v) for q, v in zip(PERCENTILES, qs)},
            "max": gaps.max()}  # fmt: skip

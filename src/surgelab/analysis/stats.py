"""Exact statistics over raw values (no histograms, no sketches)."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["distribution", "gap_distribution", "PERCENTILES"]

PERCENTILES = (50, 90, 95, 99)


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

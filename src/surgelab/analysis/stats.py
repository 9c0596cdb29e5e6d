"""Exact statistics over raw values (no histograms, no sketches)."""

from __future__ import annotations

import numpy as np

__all__ = ["distribution", "PERCENTILES"]

PERCENTILES = (50, 90, 95, 99)


def distribution(values: np.ndarray, scale: float = 1.0) -> dict[str, float | int | None]:
    """count, mean, min, p50, p90, p95, p99 and max of ``values`` × ``scale``."""
    values = np.asarray(values, dtype=np.float64)
    values = values[~np.isnan(values)]
    if values.size == 0:
        return {"count": 0, "mean": None, "min": None, **{f"p{q}": None for q in PERCENTILES}, "max": None}
    values = values * scale
    qs = np.percentile(values, PERCENTILES)
    return {
        "count": int(values.size),
        "mean": float(values.mean()),
        "min": float(values.min()),
        **{f"p{q}": float(v) for q, v in zip(PERCENTILES, qs)},
        "max": float(values.max()),
    }

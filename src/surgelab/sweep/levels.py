"""Which levels a sweep visits: a fixed ladder, then (adaptive) finer rungs around the knee.

Coarse steps find the region fast; the refinement spends the remaining level budget where
the curve bends, which is where capacity planning needs resolution.
"""

from __future__ import annotations

import math

from surgelab.sweep.config import SweepConfig

__all__ = ["ladder", "refinement"]


def _round(value: float, whole: bool) -> float:
    return float(max(1, round(value))) if whole else float(f"{value:.4g}")


def ladder(config: SweepConfig) -> list[float]:
    """The planned levels in increasing order (before any refinement), at most ``max_levels``."""
    whole = config.mode == "concurrency"
    levels: list[float]
    if config.levels is not None:
        levels = sorted({_round(v, whole) for v in config.levels})
        return levels[: config.max_levels]
    levels = []
    if config.spacing == "linear":
        n = int(math.floor((config.max - config.start) / config.step + 1e-9)) + 1
        values = [config.start + i * config.step for i in range(n)]
    else:
        n = int(math.floor(math.log(config.max / config.start) / math.log(config.factor) + 1e-9)) + 1
        values = [config.start * config.factor**i for i in range(n)]
    for value in values:
        v = _round(value, whole)
        if not levels or v > levels[-1]:
            levels.append(v)
    return levels[: config.max_levels]


def refinement(done: list[float], knee_level: float | None, config: SweepConfig, budget: int) -> list[float]:
    """New levels strictly between the knee's neighbours (already measured), none repeated.

    With the coarse levels ``… a < k < b …`` around the knee ``k``, ``refine`` new points are
    spread evenly over (a, b), avoiding levels already run; integer levels for users.
    """
    if knee_level is None or config.refine == 0 or budget <= 0:
        return []
    ordered = sorted(set(done))
    i = ordered.index(knee_level) if knee_level in ordered else None
    if i is None:
        return []
    lo = ordered[i - 1] if i > 0 else knee_level / config.factor
    hi = ordered[i + 1] if i + 1 < len(ordered) else knee_level * config.factor
    whole = config.mode == "concurrency"
    best: list[float] = []
    for count in range(config.refine, config.refine + 4):  # a point may land on k or round onto a neighbour
        new: list[float] = []
        for j in range(1, count + 1):
            v = _round(lo + (hi - lo) * j / (count + 1), whole)
            if lo < v < hi and v not in ordered and v not in new:
                new.append(v)
        if len(new) > len(best):
            best = new
        if len(best) >= config.refine:
            break
    return sorted(best)[: min(budget, config.refine)]
